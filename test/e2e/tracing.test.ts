// W3C trace context end to end: HTTP `traceparent` -> gateway span -> envelope -> worker request
// spans -> batch spans linked to the requests they carried. Over the in-process transport (one
// tracer) and over a real nats-server (gateway and worker with separate tracers and exporters, so
// the context can only have crossed inside the envelope).
import { afterAll, describe, expect, it } from 'vitest'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { connect } from '@nats-io/transport-node'
import { serve } from '@hono/node-server'
import type { AddressInfo } from 'node:net'
import { createApp } from '@cohort/gateway'
import { InProcessTransport, createNatsTransport, type Transport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { Type, definePredictor } from '@cohort/predictor'
import { ATTR, SPAN, type LogFields, type Logger } from '@cohort/observability'
import { memoryTracing, newTraceparent, postJson, startNatsServer, type MemoryTracing } from '@cohort/test-support'

/** A predictor that holds every batch until `release()`; `batch` is the size it ran in. */
function gatedPredictor() {
  let open!: () => void
  let gate = new Promise<void>((r) => (open = r))
  const predictor = definePredictor({
    name: 'gated',
    input: Type.Object({ x: Type.Number(), explode: Type.Boolean({ default: false }) }),
    output: Type.Object({ y: Type.Number(), batch: Type.Integer() }),
    batch: { maxBatchSize: 64 },
    async predict(xs) {
      await gate
      if (xs.some((x) => x.explode)) {
        throw new Error('exploded on purpose')
      }
      return xs.map((x) => ({ y: x.x * 2, batch: xs.length }))
    },
  })
  return {
    predictor,
    release() {
      open()
    },
    close() {
      gate = new Promise<void>((r) => (open = r))
    },
  }
}

/** A logger that keeps its lines. */
function memoryLogger(): Logger & { lines: { level: string; msg: string; fields: LogFields }[] } {
  const lines: { level: string; msg: string; fields: LogFields }[] = []
  const at = (level: string) => (fields: LogFields, msg: string) => void lines.push({ level, msg, fields })
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

interface Env {
  url: string
  log: ReturnType<typeof memoryLogger>
  worker: CohortWorker
  gw: MemoryTracing
  wk: MemoryTracing
  gate: ReturnType<typeof gatedPredictor>
  close(): Promise<void>
}

async function start(gwTransport: Transport, wkTransport: Transport, sharedTracer: boolean): Promise<Env> {
  const gw = memoryTracing()
  const wk = sharedTracer ? gw : memoryTracing()
  const gate = gatedPredictor()
  const log = memoryLogger()
  const worker = new CohortWorker({ transport: wkTransport, runners: [new PredictorRunner(gate.predictor)], tracer: wk.tracer, logger: log })
  await worker.start()
  const app = createApp({ transport: gwTransport, tracer: gw.tracer, logger: log })
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
  })
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log,
    worker,
    gw,
    wk,
    gate,
    async close() {
      gate.release()
      await worker.drain()
      await new Promise<void>((r) => server.close(() => r()))
      await gw.shutdown()
      await wk.shutdown()
    },
  }
}

async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}`)
    }
    await new Promise((r) => setTimeout(r, 5))
  }
}

const N = 5

/**
 * One request alone (it holds the executor), then N concurrent requests that queue behind it and
 * run as one batch; each HTTP request carries its own traceparent.
 */
async function runScenario(env: Env) {
  const first = newTraceparent()
  const lone = postJson(`${env.url}/models/gated/predictions`, { input: { x: 0 } }, { traceparent: first.traceparent })
  const server = env.worker.servers[0]!
  await until(() => server.runningItems === 1 || server.engine.stats.batches === 1, 'the first batch to start')
  const parents = Array.from({ length: N }, () => newTraceparent())
  const burst = parents.map((p, i) =>
    postJson(
      `${env.url}/v2/models/gated/infer`,
      { inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [i + 1] }] },
      {
        traceparent: p.traceparent,
        tracestate: `cohort=t${i}`,
      },
    ),
  )
  await until(() => server.engine.queued === N, `${N} queued items`)
  env.gate.release()
  const [r0, ...rs] = await Promise.all([lone, ...burst])
  expect(r0.status).toBe(200)
  expect(r0.body.output).toEqual({ y: 0, batch: 1 })
  for (const r of rs) {
    expect(r.status).toBe(200)
  }
  await env.gw.provider.forceFlush()
  await env.wk.provider.forceFlush()
  return { first, parents }
}

function checkTraces(env: Env, first: { traceId: string; spanId: string }, parents: { traceId: string; spanId: string }[]) {
  const gwSpans = env.gw.spans(SPAN.gatewayInfer)
  const reqSpans = env.wk.spans(SPAN.workerRequest)
  const batchSpans = env.wk.spans(SPAN.workerBatch)
  expect(gwSpans).toHaveLength(N + 1)
  expect(reqSpans).toHaveLength(N + 1)
  expect(batchSpans).toHaveLength(2)

  // Each gateway span is a SERVER child of its HTTP caller's span, in the caller's trace.
  const gatewayOf = (p: { traceId: string; spanId: string }): ReadableSpan => {
    const g = gwSpans.filter((s) => s.spanContext().traceId === p.traceId)
    expect(g).toHaveLength(1)
    expect(g[0]!.parentSpanContext?.spanId).toBe(p.spanId)
    expect(g[0]!.kind).toBe(SpanKind.SERVER)
    expect(g[0]!.attributes).toMatchObject({ [ATTR.model]: 'gated', [ATTR.items]: 1, [ATTR.httpStatus]: 200 })
    return g[0]!
  }
  // Each worker request span shares that trace id and is a child of the gateway span.
  const requestOf = (g: ReadableSpan): ReadableSpan => {
    const w = reqSpans.filter((s) => s.spanContext().traceId === g.spanContext().traceId)
    expect(w).toHaveLength(1)
    expect(w[0]!.parentSpanContext?.spanId).toBe(g.spanContext().spanId)
    expect(w[0]!.kind).toBe(SpanKind.CONSUMER)
    expect(w[0]!.attributes[ATTR.requestId]).toBe(g.attributes[ATTR.requestId])
    return w[0]!
  }
  const loneReq = requestOf(gatewayOf(first))
  const burstReqs = parents.map((p, i) => {
    const w = requestOf(gatewayOf(p))
    // tracestate travels with traceparent through the envelope.
    expect(w.spanContext().traceState?.get('cohort')).toBe(`t${i}`)
    return w
  })

  // The batch of N has exactly N links: the request spans of the items it carried.
  const big = batchSpans.find((b) => b.attributes[ATTR.batchSize] === N)!
  expect(big).toBeDefined()
  expect(big.attributes).toMatchObject({ [ATTR.model]: 'gated', [ATTR.batchReason]: 'idle' })
  expect(typeof big.attributes[ATTR.computeMs]).toBe('number')
  expect(big.parentSpanContext).toBeUndefined()
  expect(big.links).toHaveLength(N)
  expect(new Set(big.links.map((l) => l.context.spanId))).toEqual(new Set(burstReqs.map((w) => w.spanContext().spanId)))
  expect(new Set(big.links.map((l) => l.context.traceId))).toEqual(new Set(parents.map((p) => p.traceId)))
  for (const l of big.links) {
    expect(l.attributes?.[ATTR.items]).toBe(1)
  }
  // A batch starts a trace of its own; each request span links back to the batch that ran it.
  expect(parents.map((p) => p.traceId)).not.toContain(big.spanContext().traceId)
  for (const w of burstReqs) {
    expect(w.links.map((l) => l.context.spanId)).toEqual([big.spanContext().spanId])
  }
  const alone = batchSpans.find((b) => b.attributes[ATTR.batchSize] === 1)!
  expect(alone.links.map((l) => l.context.spanId)).toEqual([loneReq.spanContext().spanId])
}

describe('tracing over the in-process transport (one tracer)', () => {
  let env: Env | undefined
  afterAll(() => env?.close())

  it('links gateway, worker request and batch spans', async () => {
    const t = new InProcessTransport()
    env = await start(t, t, true)
    const { first, parents } = await runScenario(env)
    checkTraces(env, first, parents)
  })

  it('marks a batch that threw as failed, and the requests it carried', async () => {
    env!.gw.exporter.reset()
    const p = newTraceparent()
    const r = await postJson(`${env!.url}/models/gated/predictions`, { input: { x: 1, explode: true } }, { traceparent: p.traceparent })
    expect(r.status).toBe(500)
    const [g] = env!.gw.spans(SPAN.gatewayInfer)
    expect(g!.attributes).toMatchObject({ [ATTR.httpStatus]: 500, [ATTR.errorCode]: 'PREDICTOR_FAILED' })
    expect(g!.status.code).toBe(SpanStatusCode.ERROR)
    const [b] = env!.wk.spans(SPAN.workerBatch)
    expect(b!.status.code).toBe(SpanStatusCode.ERROR)
    expect(b!.events.some((e) => e.name === 'exception')).toBe(true)
    const [w] = env!.wk.spans(SPAN.workerRequest)
    expect(w!.attributes[ATTR.errorCode]).toBe('PREDICTOR_FAILED')
    expect(w!.spanContext().traceId).toBe(p.traceId)
    // Logs: the worker's batch failure names the request, the gateway's failed request line too.
    const requestId = g!.attributes[ATTR.requestId]
    const batchLine = env!.log.lines.find((l) => l.msg === 'batch failed')
    expect(batchLine).toMatchObject({ level: 'error', fields: { model: 'gated', code: 'PREDICTOR_FAILED', requestIds: [requestId], traceIds: [p.traceId] } })
    expect(batchLine!.fields['err']).toBeInstanceOf(Error)
    const gwLine = env!.log.lines.find((l) => l.msg === 'request failed' && l.fields['requestId'] === requestId)
    expect(gwLine).toMatchObject({ level: 'warn', fields: { code: 'PREDICTOR_FAILED', status: 500, model: 'gated', traceId: p.traceId } })
  })

  it('records a client error on the gateway span without marking it failed', async () => {
    env!.gw.exporter.reset()
    const r = await postJson(`${env!.url}/v2/models/gated/infer`, { inputs: [] }, { traceparent: newTraceparent().traceparent })
    expect(r.status).toBe(400)
    const [g] = env!.gw.spans(SPAN.gatewayInfer)
    expect(g!.attributes).toMatchObject({ [ATTR.httpStatus]: 400, [ATTR.errorCode]: 'BAD_REQUEST' })
    expect(g!.status.code).toBe(SpanStatusCode.UNSET)
  })
})

describe('tracing across a real nats-server (separate tracers for gateway and worker)', () => {
  const closers: (() => Promise<void>)[] = []
  afterAll(async () => {
    for (const c of closers.reverse()) {
      await c().catch(() => undefined)
    }
  })

  it('carries the gateway span in the envelope to the worker, and links batches to requests', async () => {
    const nats = await startNatsServer()
    closers.push(() => nats.stop())
    const gwNc = await connect({ servers: nats.url, noAsyncTraces: true })
    const wkNc = await connect({ servers: nats.url, noAsyncTraces: true })
    const gwT = createNatsTransport(gwNc, { ownsConnection: true })
    const wkT = createNatsTransport(wkNc, { ownsConnection: true })
    closers.push(
      () => gwT.close(),
      () => wkT.close(),
    )
    const env = await start(gwT, wkT, false)
    closers.push(() => env.close())
    expect(env.gw).not.toBe(env.wk)
    const { first, parents } = await runScenario(env)
    // The gateway's exporter saw only gateway spans, the worker's only worker spans.
    expect(env.gw.spans().every((s) => s.name === SPAN.gatewayInfer)).toBe(true)
    expect(env.wk.spans().every((s) => s.name !== SPAN.gatewayInfer)).toBe(true)
    checkTraces(env, first, parents)
  })
})
