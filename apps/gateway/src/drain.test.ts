// The `draining` hook of createApp (the Node entry turns it on at SIGTERM for --drain-ms):
// readiness answers 503 at once, responses carry `Connection: close`, requests are still served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'

const echo = definePredictor({
  name: 'echo',
  input: Type.Object({ x: Type.Number() }),
  predict: (xs) => xs.map((i) => ({ y: i.x })),
})

let transport: InProcessTransport
let worker: CohortWorker

beforeAll(async () => {
  transport = new InProcessTransport()
  worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)] })
  await worker.start()
})

afterAll(async () => {
  await worker.drain()
  await transport.close()
})

describe('createApp({ draining })', () => {
  it('answers readiness 503 while draining, 200 otherwise, and keeps serving', async () => {
    let draining = false
    const app = createApp({ transport, metaTimeoutMs: 200, draining: () => draining })
    const ready = await app.request('/v2/health/ready')
    expect(ready.status).toBe(200)
    expect(ready.headers.get('connection')).toBeNull()

    draining = true
    const r = await app.request('/v2/health/ready')
    expect(r.status).toBe(503)
    expect(await r.json()).toEqual({ ready: false, draining: true })
    expect(r.headers.get('connection')).toBe('close')
    const live = await app.request('/v2/health/live')
    expect(live.status).toBe(200)
    const p = await app.request('/models/echo/predictions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: { x: 5 } }),
    })
    expect(p.status).toBe(200)
    expect(((await p.json()) as { output: { y: number } }).output.y).toBe(5)
    expect(p.headers.get('connection')).toBe('close')

    draining = false
    expect((await app.request('/v2/health/ready')).status).toBe(200)
  })

  it('has no draining state without the hook', async () => {
    const app = createApp({ transport, metaTimeoutMs: 200 })
    const r = await app.request('/v2/health/ready')
    expect(r.status).toBe(200)
    expect(await r.json()).not.toHaveProperty('draining')
  })
})
