// Fair shares between tenants across processes over a real nats-server: a `cohort worker` child
// process serves the sleep-based `sleepy` predictor (40 ms per batch of up to 4: not CPU-bound);
// an in-process gateway with two API keys forwards each key as the envelope's tenant. One key
// floods with long deadlines; the other key, sending a trickle with 1 s deadlines, is still served.
// Without fair shares the flood's queue (about 2 s deep) would push every quiet request past its
// deadline (admission would refuse it with 503).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createApp } from '@cohort/gateway'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'
import type { Hono } from 'hono'

let nats: NatsServerHandle
let nc: NatsConnection
let gt: Transport
let worker: CliProcess
let app: Hono
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'fair', '--threads', '1', '--max-batch-size', '4', '--max-tenant-queue', '48', '--predictor', SLEEPY_PREDICTOR], {
    SLEEPY_MS: '40',
  })
  await worker.waitFor(/worker fair serving sleepy/, 60_000)
  nc = await connect({ servers: nats.url })
  gt = createNatsTransport(nc)
  app = createApp({ transport: gt, apiKeys: ['flood-key', 'quiet-key'], metaTimeoutMs: 2_000, logger: quiet, workerLoss: false })
}, 90_000)

afterAll(async () => {
  await worker?.stop('SIGTERM', 10_000)
  await gt?.close()
  await nc?.close()
  await nats?.stop()
})

const predict = (key: string, x: number, timeoutMs: number) =>
  app.request('/models/sleepy/predictions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-cohort-timeout-ms': String(timeoutMs) },
    body: JSON.stringify({ input: { x } }),
  })

describe('tenant fairness over NATS (cross-process)', () => {
  it('a flood from one API key is refused at its tenant bound while the other key is served on time', async () => {
    // Warm the cost model so admission judges (5 batches).
    for (let i = 0; i < 6; i++) expect((await predict('quiet-key', i, 5_000)).status).toBe(200)
    let flooding = true
    const floodCodes = new Map<string, number>()
    // 200 concurrent flood requests, each resent as soon as it is answered: far above the
    // 100 items/s the worker can do, with 10 s deadlines so admission lets them queue.
    const flood = Array.from({ length: 200 }, async (_, k) => {
      while (flooding) {
        const r = await predict('flood-key', 1000 + k, 10_000)
        const code = r.status === 200 ? 'OK' : ((await r.json()) as { code: string }).code
        floodCodes.set(code, (floodCodes.get(code) ?? 0) + 1)
        if (r.status !== 200) await new Promise((res) => setTimeout(res, 20))
      }
    })
    await new Promise((r) => setTimeout(r, 500)) // the flood is on
    const quietStatus: number[] = []
    for (let i = 0; i < 10; i++) {
      const r = await predict('quiet-key', i, 1_000)
      quietStatus.push(r.status)
      await new Promise((res) => setTimeout(res, 50))
    }
    flooding = false
    await Promise.all(flood)
    expect(quietStatus).toEqual(Array(10).fill(200))
    // The flood was refused at its own bound (503, retryable) and still got served in part.
    expect(floodCodes.get('OVERLOADED') ?? 0).toBeGreaterThan(0)
    expect(floodCodes.get('OK') ?? 0).toBeGreaterThan(0)
  }, 60_000)
})
