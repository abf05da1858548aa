// The door at the listener (early.ts) against the app's own door (InProcessTransport, a worker's
// heartbeat estimates): it refuses what the door refuses, with the same answer, and an admission
// it hands to the route is used there, not judged again.
import { describe, expect, it, vi } from 'vitest'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { CohortError, encodeHeartbeat, subjects, type WaitEstimate } from '@cohort/protocol'
import { createApp } from './app.ts'
import type { Admission } from './admission.ts'
import type { RequestHead } from './early.ts'
import type { GatewayOptions } from './options.ts'

const subj = subjects('cohort')

async function setup(o: Partial<GatewayOptions> = {}, estimate: WaitEstimate = { queued: 1000, waitMs: 5_000, serviceMs: 10 }) {
  const transport = new InProcessTransport()
  const registry = new Registry()
  let handed: Admission | undefined
  const app = createApp({ transport, registry, workerWait: { probeIntervalMs: 1e9 }, adapter: { admission: () => handed }, ...o })
  const published: string[] = []
  for (const s of [subj.infer('m'), subj.overflow('m')]) {
    const sub = transport.subscribe(s)
    void (async () => {
      for await (const m of sub) published.push(m.subject)
    })()
  }
  transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 60_000, proto: 2, models: { m: estimate } }))
  await new Promise((r) => setTimeout(r, 10))
  const head = (headers: Record<string, string> = {}, url = '/v2/models/m/infer'): RequestHead => ({
    method: 'POST',
    url,
    header: (n) => ({ 'content-type': 'application/json', 'content-length': '10', 'x-cohort-timeout-ms': '1000', ...headers })[n],
    waitedMs: 0,
  })
  const hand = (a: Admission | undefined) => (handed = a)
  return { app, published, head, hand, registry }
}

describe('the door at the listener', () => {
  it('refuses 503 what the worker-wait check refuses, after the one probe, with the app door’s answer and counts', async () => {
    const { app, published, head, registry } = await setup()
    const probe = app.early.judge(head())
    expect(probe?.admission).toMatchObject({ judged: true, probe: true })
    const d = app.early.judge(head({ 'x-request-id': 'r-1' }))
    expect(d?.answer?.status).toBe(503)
    expect(d?.answer?.headers).toMatchObject({ 'retry-after': '5', 'x-request-id': 'r-1', 'content-type': 'application/json' })
    expect(JSON.parse(d?.answer?.body ?? '')).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/refused at the door \(worker-wait check\)/) })
    // The app's own door answers the same request the same way.
    const res = await app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '1000' }, body: '{ not json' })
    expect(res.status).toBe(503)
    expect((await res.json()) as unknown).toEqual({ ...JSON.parse(d?.answer?.body ?? ''), error: expect.any(String) })
    expect(published).toEqual([])
    expect(registry.render()).toMatch(/cohort_door_refusals_total\{[^}]*check="worker_wait"[^}]*\} 2/)
  })

  it('refuses 400 DEADLINE_TOO_SHORT a deadline no idle worker can meet', async () => {
    const { app, head } = await setup({}, { queued: 0, waitMs: 0, serviceMs: 40, aloneMs: 40 })
    const d = app.early.judge(head({ 'x-cohort-timeout-ms': '10' }))
    expect(d?.answer?.status).toBe(400)
    expect(JSON.parse(d?.answer?.body ?? '')).toMatchObject({ code: 'DEADLINE_TOO_SHORT' })
    expect(d?.answer?.headers['retry-after']).toBeUndefined()
  })

  it('hands an admission to the route, which uses it instead of judging again', async () => {
    const { app, head, hand } = await setup()
    const admit = vi.spyOn(app.core.door, 'admit')
    const d = app.early.judge(head())
    expect(d?.admission?.refused).toBeUndefined()
    expect(admit).toHaveBeenCalledTimes(1)
    hand(d?.admission)
    // The probe's admission: the route reads the body ('{ not json': 400), the door is not asked again.
    const res = await app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '1000' }, body: '{ not json' })
    expect(res.status).toBe(400)
    expect(admit).toHaveBeenCalledTimes(1)
    // A refusal handed over is answered as such, without judging.
    const refused = app.early.judge(head())
    hand({ refused: new CohortError('OVERLOADED', 'handed refusal', { retryAfterS: 2 }), check: 'worker_wait' })
    expect(refused?.answer?.status).toBe(503)
    const res2 = await app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect([res2.status, ((await res2.json()) as { error: string }).error]).toEqual([503, 'handed refusal'])
  })

  it('does not judge what it cannot judge alone', async () => {
    const { app, head } = await setup({ cors: { origins: ['https://a.example'] } })
    expect(app.early.judge({ ...head(), method: 'GET' })).toBeUndefined()
    expect(app.early.judge(head({}, '/v2/models/m/generate'))).toBeUndefined()
    expect(app.early.judge(head({}, '/v2/models/m%41/infer'))).toBeUndefined()
    expect(app.early.judge(head({ origin: 'https://a.example' }))).toBeUndefined()
    expect(app.early.judge(head({ 'content-length': '70000' }))).toBeUndefined()
    expect(app.early.judge(head({ 'x-cohort-timeout-ms': 'soon' }))).toBeUndefined()
    const limited = await setup({ rateLimit: { requestsPerSecond: 10 } })
    expect(limited.app.early.judge(limited.head())).toBeUndefined()
    const jwtOnly = await setup({ jwt: { secret: 's' } })
    expect(jwtOnly.app.early.judge(jwtOnly.head({ authorization: 'Bearer k1' }))).toBeUndefined()
    const keyed = await setup({ apiKeys: ['k1'] })
    expect(keyed.app.early.judge(keyed.head({ authorization: 'Bearer k2' }))).toBeUndefined()
    expect(keyed.app.early.judge(keyed.head({ authorization: 'Bearer k1' }))).toBeDefined()
  })
})
