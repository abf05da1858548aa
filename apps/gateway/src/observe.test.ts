// What the gateway puts in the envelope's W3C fields, with tracing off (the default no-op tracer) and on.
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRequest, encodeReply, subjects, type InferRequest } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { ATTR, SPAN } from '@cohort/observability'
import { memoryTracing } from '@cohort/test-support'
import { createApp } from './app.ts'
import type { GatewayOptions } from './options.ts'

const subj = subjects()
const TID = '0af7651916cd43dd8448eb211c80319c'
const TP = `00-${TID}-b7ad6b7169203331-01`

const transports: InProcessTransport[] = []
afterAll(async () => {
  for (const t of transports) {
    await t.close()
  }
})

/** A gateway whose model `echo` answers every envelope with its items, recording what it saw. */
function env(o: Partial<GatewayOptions> = {}) {
  const transport = new InProcessTransport()
  transports.push(transport)
  const seen: InferRequest[] = []
  const sub = transport.subscribe(subj.infer('echo'))
  void (async () => {
    for await (const m of sub) {
      const req = decodeRequest(m.data)
      seen.push(req)
      m.respond(encodeReply(req.tensors ? { v: 1, id: req.id, tensors: req.tensors } : { v: 1, id: req.id, items: req.items ?? [] }))
    }
  })()
  const app = createApp({ transport, ...o })
  const infer = (headers: Record<string, string>) =>
    app.request('/v2/models/echo/infer', {
      method: 'POST',
      headers,
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2], data: [1, 2] }] }),
    })
  const predict = (headers: Record<string, string>) => app.request('/models/echo/predictions', { method: 'POST', headers, body: JSON.stringify({ input: { a: 1 } }) })
  return { seen, infer, predict }
}

describe('trace context in the envelope, tracing off (no SDK)', () => {
  it('passes the caller traceparent and tracestate through unchanged', async () => {
    const e = env()
    expect((await e.infer({ traceparent: TP, tracestate: 'k=v' })).status).toBe(200)
    expect((await e.predict({ traceparent: TP })).status).toBe(200)
    expect(e.seen.map((r) => [r.traceparent, r.tracestate])).toEqual([
      [TP, 'k=v'],
      [TP, undefined],
    ])
  })

  it('sends no trace fields without a valid traceparent', async () => {
    const e = env()
    await e.infer({})
    await e.infer({ traceparent: 'garbage' })
    await e.predict({ traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` })
    expect(e.seen).toHaveLength(3)
    for (const r of e.seen) {
      expect('traceparent' in r).toBe(false)
      expect('tracestate' in r).toBe(false)
    }
  })
})

describe('trace context in the envelope, tracing on', () => {
  it('makes the gateway span the parent the envelope names, in the caller trace', async () => {
    const t = memoryTracing()
    const e = env({ tracer: t.tracer })
    await e.infer({ traceparent: TP, tracestate: 'k=v' })
    await e.predict({})
    const [a, b] = t.spans(SPAN.gatewayInfer)
    expect(e.seen[0]!.traceparent).toBe(`00-${TID}-${a!.spanContext().spanId}-01`)
    expect(e.seen[0]!.tracestate).toBe('k=v')
    expect(a!.attributes).toMatchObject({ [ATTR.items]: 2, [ATTR.requestId]: e.seen[0]!.id, [ATTR.httpRoute]: '/v2/models/:model/infer' })
    // No incoming trace: the gateway span starts one, and the envelope carries it.
    expect(b!.parentSpanContext).toBeUndefined()
    expect(e.seen[1]!.traceparent).toBe(`00-${b!.spanContext().traceId}-${b!.spanContext().spanId}-01`)
    await t.shutdown()
  })
})
