// The door's two checks through the HTTP app (InProcessTransport): the worker-wait check refuses,
// before the body is read and without publishing, what a worker's heartbeat estimate says cannot
// finish in time; both checks count in cohort_door_refusals_total under their own `check` label.
// A body of '{ not json' tells whether it was read: a read body answers 400.
import { describe, expect, it } from 'vitest'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { decodeRequest, encodeHeartbeat, encodeReply, subjects } from '@cohort/protocol'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { createApp } from './app.ts'
import type { GatewayOptions } from './options.ts'
import { PROTO_DIR, startGrpcServer } from './adapters/grpc/server.ts'
import { keptLogger } from '@cohort/test-support'

const subj = subjects('cohort')

/** A worker whose queue for `m` is 5 s deep (its heartbeat carries the estimate). */
async function deepQueue(transport: InProcessTransport): Promise<void> {
  transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 60_000, proto: 2, models: { m: { queued: 1000, waitMs: 5_000, serviceMs: 10 } } }))
  await new Promise((r) => setTimeout(r, 10))
}

async function setup(o: Partial<GatewayOptions> = {}) {
  const transport = new InProcessTransport()
  const registry = new Registry()
  const app = createApp({ transport, registry, ...o })
  const published: string[] = []
  for (const s of [subj.infer('m'), subj.overflow('m')]) {
    const sub = transport.subscribe(s)
    void (async () => {
      for await (const m of sub) published.push(m.subject)
    })()
  }
  await deepQueue(transport)
  const post = (timeoutMs = '1000', headers: Record<string, string> = {}) =>
    app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': timeoutMs, ...headers }, body: '{ not json' })
  const refusals = (check: string) => {
    const line = registry
      .render()
      .split('\n')
      .find((l) => l.startsWith('cohort_door_refusals_total{') && l.includes(`check="${check}"`))
    return line ? Number(line.split(' ').pop()) : 0
  }
  return { transport, published, post, refusals }
}

describe('the door checks in the HTTP app', () => {
  it('worker-wait: after one probe, refuses 503 OVERLOADED + Retry-After before reading the body, publishing nothing', async () => {
    // One probe, then none within the test: with the default 100 ms between probes, a loaded
    // machine's pause between the two posts made the second one a probe too (read: 400).
    const { transport, published, post, refusals } = await setup({ workerWait: { probeIntervalMs: 1e9 } })
    const probe = await post()
    expect(probe.status).toBe(400) // the probe passed the door: its body was read
    const res = await post()
    expect(res.status).toBe(503)
    expect(Number(res.headers.get('retry-after'))).toBe(5)
    expect(await res.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/refused at the door \(worker-wait check\)/) })
    expect(published).toEqual([])
    expect([refusals('worker_wait'), refusals('event_loop_lag')]).toEqual([1, 0])
    // A deadline the estimate meets passes the door.
    expect((await post('10000')).status).toBe(400)
    await transport.close()
  })

  it('worker-wait off (workerWait: false): the same request is read', async () => {
    const { transport, post, refusals } = await setup({ workerWait: false })
    for (let i = 0; i < 3; i++) expect((await post()).status).toBe(400)
    expect(refusals('worker_wait')).toBe(0)
    await transport.close()
  })

  it('event-loop-lag: counted under its own label', async () => {
    const { transport, post, refusals } = await setup({ adapter: { queueDelayMs: () => 5000 } })
    expect((await post()).status).toBe(503)
    expect([refusals('event_loop_lag'), refusals('worker_wait')]).toEqual([1, 0])
    await transport.close()
  })

  it('refusals write no warn line each: 50 refusals are 50 counts and one aggregated line (the first), nothing published', async () => {
    const { logger, lines } = keptLogger()
    const { transport, published, post, refusals } = await setup({ logger, workerWait: { probeIntervalMs: 1e9 } })
    expect((await post()).status).toBe(400) // the probe: read, a bad body, logged as a failure
    lines.length = 0
    for (let i = 0; i < 50; i++) expect((await post()).status).toBe(503)
    expect(refusals('worker_wait')).toBe(50)
    expect(lines.map((l) => `${l.level} ${l.msg}`)).toEqual(['warn requests refused (overload): 503 OVERLOADED, counted in cohort_door_refusals_total'])
    expect(published).toEqual([])
    await transport.close()
  })

  it('failures by the deadline write no warn line each: 20 worker answers of 504 DEADLINE_EXCEEDED and 400 DEADLINE_TOO_SHORT are one aggregated line', async () => {
    const { logger, lines } = keptLogger()
    const transport = new InProcessTransport()
    const app = createApp({ transport, registry: new Registry(), logger, workerWait: false })
    const sub = transport.subscribe(subj.infer('m'))
    let n = 0
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        const code = n++ % 2 === 0 ? 'DEADLINE_EXCEEDED' : 'DEADLINE_TOO_SHORT'
        m.respond(encodeReply({ v: 1, id: req.id, error: { code, message: `${code} on purpose` } }))
      }
    })()
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] })
    const statuses: number[] = []
    for (let i = 0; i < 20; i++) {
      statuses.push((await app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status)
    }
    expect(statuses.filter((s) => s === 504)).toHaveLength(10)
    expect(statuses.filter((s) => s === 400)).toHaveLength(10)
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
      'requests failed by their deadline: 504 DEADLINE_EXCEEDED, 400 DEADLINE_TOO_SHORT, counted in cohort_requests_total',
    ])
    await app.close()
    await transport.close()
  })

  it('refusalLogIntervalMs: 0 logs every refusal (for debugging); the option reaches the door', async () => {
    const { logger, count } = keptLogger()
    const { transport, post } = await setup({ logger, workerWait: { probeIntervalMs: 1e9 }, refusalLogIntervalMs: 0 })
    await post() // the probe
    const before = count('warn')
    for (let i = 0; i < 5; i++) expect((await post()).status).toBe(503)
    expect(count('warn') - before).toBe(5)
    await transport.close()
  })

  it('arrival-wait: a request that already waited its budget before the door saw it is refused at once, before its body is read; a shorter wait is taken off its deadline', async () => {
    let waited = 2000
    const { transport, post, refusals } = await setup({ workerWait: false, adapter: { arrivedAt: () => performance.now() - waited } })
    const res = await post('1000')
    expect(res.status).toBe(503)
    expect(await res.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/waited 2\d{3} ms before the gateway could judge it.*arrival-wait check/) })
    expect(refusals('arrival_wait')).toBe(1)
    waited = 100
    expect((await post('1000')).status).toBe(400) // passed the door: its body was read
    expect(refusals('arrival_wait')).toBe(1)
    await transport.close()
  })

  it('the connection rule holds for a door refusal: a refused body over 64 KiB (declared) gets Connection: close, a small one keeps the connection', async () => {
    const { transport, post } = await setup({ workerWait: false, adapter: { queueDelayMs: () => 5000 } })
    const big = await post('1000', { 'content-length': String(70 * 1024) })
    expect(big.status).toBe(503)
    expect(big.headers.get('connection')).toBe('close')
    const small = await post('1000', { 'content-length': '10' })
    expect(small.status).toBe(503)
    expect(small.headers.get('connection')).toBeNull()
    await transport.close()
  })

  it('feedback through the door: a request it admitted and that was answered after its deadline raises the margin of that model and tenant; one answered in time does not', async () => {
    const transport = new InProcessTransport()
    const app = createApp({ transport, registry: new Registry(), logger: keptLogger().logger })
    // A v1 worker with an idle queue (10 ms to run): the door admits by the estimate, with a ticket.
    transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 60_000, proto: 1, models: { m: { queued: 0, waitMs: 0, serviceMs: 10 } } }))
    await new Promise((r) => setTimeout(r, 10))
    let delayMs = 0
    const sub = transport.subscribe(subj.infer('m'))
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        // Answer OK `delayMs` past the request's deadline (negative: before it).
        setTimeout(() => m.respond(encodeReply({ v: 1, id: req.id, tensors: {} })), Math.max(0, req.deadline + delayMs - Date.now()))
      }
    })()
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] })
    const post = () => app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '400' }, body })
    const control = app.core.door.workerWait!.control
    delayMs = -350 // well in time
    expect((await post()).status).toBe(200)
    expect(control.margin('m', '')).toBe(0.2)
    delayMs = 20 // within the reply grace, but past the deadline (on a slow machine past the grace too: 504, late all the same)
    expect([200, 504]).toContain((await post()).status)
    expect(control.margin('m', '')).toBeGreaterThan(0.3) // 0.2 + (0.8 - 0.2) / 4 = 0.35, less a little decay
    expect(control.margin('other', '')).toBe(0.2)
    await app.close()
    await transport.close()
  })

  it('over gRPC the worker-wait refusal is RESOURCE_EXHAUSTED with cohort-code OVERLOADED, retry-after and grpc-retry-pushback-ms, and writes no warn line each', async () => {
    const transport = new InProcessTransport()
    // One probe, then none within the test (a loaded machine may take longer than the default 100 ms between calls).
    const kept = keptLogger()
    const server = await startGrpcServer({ transport, port: 0, workerWait: { probeIntervalMs: 1e9 }, logger: kept.logger })
    await deepQueue(transport)
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
    const client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
    const req = { model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } }] }
    const call = () =>
      new Promise<grpc.ServiceError | null>((resolve) =>
        client['ModelInfer']!(req, new grpc.Metadata(), { deadline: Date.now() + 1000 }, (e: grpc.ServiceError | null) => resolve(e)),
      )
    const probe = await call() // passes the door; no worker serves m
    expect(probe?.metadata.get('cohort-code')).not.toEqual(['OVERLOADED'])
    const e = await call()
    expect(e?.code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    expect(e?.metadata.get('cohort-code')).toEqual(['OVERLOADED'])
    expect(e?.details).toMatch(/worker-wait check/)
    expect(Number(e?.metadata.get('retry-after')[0])).toBeGreaterThanOrEqual(1)
    expect(Number(e?.metadata.get('grpc-retry-pushback-ms')[0])).toBe(1000 * Number(e?.metadata.get('retry-after')[0]))
    // As cheap as over HTTP: 20 more refusals, no warn line of their own (the one aggregated line came with the first).
    const warns = kept.count('warn')
    for (let i = 0; i < 20; i++) expect((await call())?.code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    expect(kept.count('warn')).toBe(warns)
    client.close()
    await server.close()
    await transport.close()
  })
})
