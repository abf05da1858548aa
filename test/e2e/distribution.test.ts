// Capacity-aware distribution and runtime reconfiguration over real NATS with worker processes.
// Counts and orders only; the rates (goodput against summed capacity, p99) are in
// test/bench/distribution.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createApp, createGatewayCore, type Upstream } from '@cohort/gateway'
import { CohortError, decodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const S = subjects()
const BATCH = 16

function startWorker(nats: string, id: string, sleepMs: number, extra: string[] = []): CliProcess {
  return spawnCohort(['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', String(BATCH), ...extra], {
    SLEEPY_MS: String(sleepMs),
  })
}

/**
 * Send `n` requests with `concurrency` outstanding (a closed loop of a fixed count, not a duration):
 * how many each worker answered, and how many failed.
 */
async function countByWorker(up: Upstream, n: number, concurrency: number): Promise<{ byWorker: Record<string, number>; failed: string[] }> {
  const byWorker: Record<string, number> = {}
  const failed: string[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const x = next++
        const r = await up
          .infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + 30_000, items: [{ x }] }, 30_000, undefined)
          .catch((e: unknown) => {
            if (!(e instanceof CohortError)) {
              throw e
            }
            failed.push(e.code)
            return undefined
          })
        if (r?.errors) {
          failed.push(JSON.stringify(r.errors))
        } else if (r) {
          byWorker[r.worker ?? '?'] = (byWorker[r.worker ?? '?'] ?? 0) + 1
        }
      }
    }),
  )
  return { byWorker, failed }
}

async function workerMetas(t: Transport): Promise<Record<string, ModelMeta>> {
  const replies = await t.requestAll(S.discover(), new Uint8Array(0), { timeoutMs: 200 })
  const out: Record<string, ModelMeta> = {}
  for (const r of replies) {
    const v = decodeValue(r) as { worker: string; models: ModelMeta[] }
    const m = v.models.find((x) => x.name === 'sleepy')
    if (m) {
      out[v.worker] = m
    }
  }
  return out
}

describe('over NATS: distribution and reconfiguration', () => {
  let nats: NatsServerHandle
  let nc: NatsConnection
  let transport: Transport
  let up: Upstream
  const procs: CliProcess[] = []

  beforeAll(async () => {
    nats = await startNatsServer()
    nc = await connect({ servers: nats.url })
    transport = createNatsTransport(nc)
    up = createGatewayCore({ transport, metaTimeoutMs: 2000, workerLoss: false }).upstream
  })
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await nc?.close()
    await nats?.stop()
  })

  it('capacity-aware distribution gives a worker twenty times faster most of the work; random splits it evenly', async () => {
    // Counts, not rates: the same 480 requests (64 outstanding) against a fast (20 ms per batch of
    // 16) and a slow (400 ms) worker, first with --distribution random, then capacity (the default).
    // Random: NATS picks a queue-group member per message, so each gets about half, whatever their
    // speed. Capacity-aware: the slow worker stops listening while its queue is full, so the fast one
    // takes the rest. Throughput and latency of the two modes: test/bench/distribution.ts.
    const N = 480
    const share = (r: { byWorker: Record<string, number> }, fast: string) =>
      (r.byWorker[fast] ?? 0) / Object.values(r.byWorker).reduce((a, b) => a + b, 0)
    const randomFast = startWorker(nats.url, 'fast-r', 20, ['--distribution', 'random'])
    const randomSlow = startWorker(nats.url, 'slow-r', 400, ['--distribution', 'random'])
    procs.push(randomFast, randomSlow)
    await Promise.all([randomFast.waitFor(/serving/, 60_000), randomSlow.waitFor(/serving/, 60_000)])
    const random = await countByWorker(up, N, 4 * BATCH)
    expect(await randomFast.stop('SIGTERM')).toBe(0)
    expect(await randomSlow.stop('SIGTERM')).toBe(0)

    const slow = startWorker(nats.url, 'slow', 400)
    const fast = startWorker(nats.url, 'fast', 20)
    procs.push(slow, fast)
    await Promise.all([slow.waitFor(/serving/, 60_000), fast.waitFor(/serving/, 60_000)])
    const capacity = await countByWorker(up, N, 4 * BATCH)
    console.log(`fast worker's share: random ${share(random, 'fast-r').toFixed(3)} ${JSON.stringify(random.byWorker)}, capacity-aware ${share(capacity, 'fast').toFixed(3)} ${JSON.stringify(capacity.byWorker)}`)
    expect(random.failed).toEqual([])
    expect(capacity.failed).toEqual([])
    expect(Object.values(random.byWorker).reduce((a, b) => a + b, 0)).toBe(N)
    expect(Object.values(capacity.byWorker).reduce((a, b) => a + b, 0)).toBe(N)
    // Random: about half each (binomial spread of 480 draws is about 2%).
    expect(share(random, 'fast-r')).toBeGreaterThan(0.35)
    expect(share(random, 'fast-r')).toBeLessThan(0.65)
    // Capacity-aware: the fast worker does most of it, and clearly more than under random.
    expect(share(capacity, 'fast')).toBeGreaterThan(0.65)
    expect(share(capacity, 'fast') - share(random, 'fast-r')).toBeGreaterThan(0.15)
  })

  it('follows runtime batching changes on every worker, including a worker that joins later', async () => {
    const app = createApp({ transport, adminKeys: ['secret'] })
    const put = (body: unknown, key = 'secret') =>
      app.request('/admin/models/sleepy/batching', {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
      })
    expect((await put({ maxBatchSize: 3 }, 'wrong')).status).toBe(403)
    expect((await app.request('/admin/models/sleepy/batching', { method: 'PUT', body: '{}' })).status).toBe(401)
    expect((await put({ maxBatchSize: 0 })).status).toBe(400)
    expect((await put({ bogus: 1 })).status).toBe(400)
    const t0 = Date.now()
    const res = await put({ maxBatchSize: 3, policy: 'timer', maxDelayMs: 2 })
    expect(res.status).toBe(200)
    let metas: Record<string, ModelMeta> = {}
    // Polled, with a bound far above the usual propagation (tens of ms): how fast it spreads is not
    // the claim here, that every worker takes it is.
    const applied = () => Object.values(metas).length >= 2 && Object.values(metas).every((m) => m.maxBatchSize === 3 && m.policy === 'timer')
    while (Date.now() - t0 < 15_000) {
      metas = await workerMetas(transport)
      if (applied()) {
        break
      }
    }
    console.log(`batching change on both workers after ${Date.now() - t0} ms`)
    expect(applied(), JSON.stringify(metas)).toBe(true)
    expect(Object.keys(metas).sort()).toEqual(['fast', 'slow'])
    const late = startWorker(nats.url, 'late', 20)
    procs.push(late)
    await late.waitFor(/serving/, 60_000)
    // Discovery collects answers for 200 ms: poll until the new worker is among them (bounded).
    let after = await workerMetas(transport)
    for (const end = Date.now() + 15_000; !after['late'] && Date.now() < end; ) {
      after = await workerMetas(transport)
    }
    expect(after['late']).toMatchObject({ maxBatchSize: 3, policy: 'timer', maxDelayMs: 2 })
    const cfg = await app.request('/v2/models/sleepy/config')
    expect(cfg.status).toBe(200)
    expect(await cfg.json()).toMatchObject({
      name: 'sleepy',
      max_batch_size: 3,
      dynamic_batching: { max_queue_delay_microseconds: 2000 },
      parameters: { cohort_policy: { string_value: 'timer' } },
      input: expect.arrayContaining([{ name: 'x', data_type: 'TYPE_FP64', dims: [] }]),
    })
  })
})
