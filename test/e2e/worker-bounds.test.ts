// The worker's in-flight bound on a real nats-server whose max_payload is 64 KiB (so larger
// messages travel in chunks): requests past it are refused at once with 503 OVERLOADED, a chunked
// one before it is pulled, one larger than the whole bound with 413; the gateway passes them on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '@cohort/gateway'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { startNatsServer, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import type { Hono } from 'hono'

const gate: (() => void)[] = []
const hold = definePredictor({
  name: 'hold',
  input: Type.Object({ s: Type.String() }),
  predict: async (xs) => {
    await new Promise<void>((r) => gate.push(r))
    return xs.map((x) => x.s.length)
  },
})

let nats: NatsServerHandle
const conns: NatsConnection[] = []
let wt: Transport
let gt: Transport
let worker: CohortWorker
let app: Hono
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: 64 * 1024 })
  const wc = await connect({ servers: nats.url })
  const gc = await connect({ servers: nats.url })
  conns.push(wc, gc)
  wt = createNatsTransport(wc, { inflight: { maxRequests: 2, maxBytes: 150_000 } })
  gt = createNatsTransport(gc)
  worker = new CohortWorker({ transport: wt, runners: [new PredictorRunner(hold)], logger: quiet, batching: { maxBatchSize: 1 } })
  await worker.start()
  app = createApp({ transport: gt, metaTimeoutMs: 2_000, logger: quiet })
})

afterAll(async () => {
  for (const r of gate.splice(0)) r()
  await ifStarted(worker)?.drain()
  await ifStarted(wt)?.close()
  await ifStarted(gt)?.close()
  for (const nc of conns) await nc.close()
  await ifStarted(nats)?.stop()
})

const predict = (s: string) => app.request('/models/hold/predictions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { s } }) })

async function until(cond: () => boolean): Promise<void> {
  await expect.poll(cond, { timeout: 10_000, interval: 10 }).toBe(true)
}

describe('the worker in-flight bound (NATS)', () => {
  it('refuses a request past maxRequests with 503 OVERLOADED + Retry-After while two are held, then serves again', async () => {
    const a = predict('a')
    const b = predict('b')
    // One runs (maxBatchSize 1), one waits in the queue: both are held by the worker.
    await until(() => gate.length === 1)
    const c = await predict('c')
    expect(c.status).toBe(503)
    expect(c.headers.get('retry-after')).toBe('1')
    expect(await c.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringContaining('in-flight bound') })
    gate.shift()!()
    await until(() => gate.length === 1)
    gate.shift()!()
    expect((await a).status).toBe(200)
    expect((await b).status).toBe(200)
    const d = predict('d')
    await until(() => gate.length === 1)
    gate.shift()!()
    expect(await (await d).json()).toMatchObject({ output: 1 })
  })

  it('counts a chunked message at its full size and refuses it (503) before pulling it when the bytes would pass the bound', async () => {
    const a = predict('x'.repeat(100_000)) // ~100 kB: chunked (past 64 KiB), held
    await until(() => gate.length === 1)
    const b = await predict('y'.repeat(100_000)) // 100 + 100 kB > 150 kB bound
    expect(b.status).toBe(503)
    expect((await b.json()).code).toBe('OVERLOADED')
    gate.shift()!()
    expect(await (await a).json()).toMatchObject({ output: 100_000 })
  })

  it('answers 413 naming the bound for a message larger than the whole bytes bound (never servable)', async () => {
    const r = await predict('z'.repeat(200_000))
    expect(r.status).toBe(413)
    expect((await r.json()).error).toMatch(/in-flight bytes bound \(inflight\.maxBytes\) of 150000 bytes/)
    expect(gate).toHaveLength(0)
  })
})
