import { describe, expect, it } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { decodeRequest, encodeReply, subjects } from '@cohort/protocol'
import { createApp } from './app.ts'

const subj = subjects('cohort')

function appWithLag(lagMs: number) {
  const transport = new InProcessTransport()
  const app = createApp({ transport, adapter: { queueDelayMs: () => lagMs } })
  return { transport, app }
}

const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [1] }] })

describe('front-door admission (adapter queueDelayMs)', () => {
  it('refuses 503 OVERLOADED with Retry-After before reading the body when the delay exceeds the budget', async () => {
    const { app, transport } = appWithLag(200)
    const res = await app.request('/v2/models/m/infer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '100' },
      body: '{ not json', // never parsed: a parsed body would be 400
    })
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('1')
    expect(await res.json()).toMatchObject({ code: 'OVERLOADED' })
    await transport.close()
  })

  it('takes the delay off the deadline sent to the worker', async () => {
    // Independent of machine speed: the gateway stamps the deadline at some moment between t0 (before
    // the request) and t1 (when the worker sees it), so it lies in [t0, t1] + (timeout - delay).
    // Without the delay taken off it would be >= t0 + 1000, past t1 + 600 unless the path took 400 ms.
    const { app, transport } = appWithLag(400)
    const sub = transport.subscribe(subj.infer('m'))
    const seen: { deadline: number; at: number }[] = []
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        seen.push({ deadline: req.deadline, at: Date.now() })
        m.respond(encodeReply({ v: 1, id: req.id, tensors: {} }))
      }
    })()
    const t0 = Date.now()
    const res = await app.request('/v2/models/m/infer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '1000' },
      body,
    })
    expect(res.status).toBe(200)
    expect(seen).toHaveLength(1)
    const { deadline, at: t1 } = seen[0]!
    expect(deadline).toBeGreaterThanOrEqual(t0 + 600)
    expect(deadline).toBeLessThanOrEqual(t1 + 600)
    sub.unsubscribe()
    await transport.close()
  })

  it('changes nothing when the adapter reports no delay', async () => {
    const { app, transport } = appWithLag(0)
    const res = await app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{ not json' })
    expect(res.status).toBe(400)
    await transport.close()
  })
})
