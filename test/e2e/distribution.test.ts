// Capacity-aware distribution and runtime reconfiguration over real NATS with worker processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Upstream, createApp } from '@cohort/gateway'
import { CohortError, decodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const S = subjects()
const BATCH = 16

function startWorker(nats: string, id: string, sleepMs: number): CliProcess {
  return spawnCohort(['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', String(BATCH)], {
    SLEEPY_MS: String(sleepMs),
  })
}

interface LoadResult {
  ok: number
  failed: number
  seconds: number
  p99: number
  byWorker: Record<string, number>
}

/** Closed loop with `concurrency` outstanding requests for `seconds`. */
async function closedLoop(up: Upstream, concurrency: number, seconds: number): Promise<number> {
  const end = Date.now() + seconds * 1000
  let ok = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const r = await up
          .infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + 5000, items: [{ x: 1 }] }, 5000, undefined)
          .catch(() => undefined)
        if (r && !r.errors) {
          ok++
        }
      }
    }),
  )
  return ok / seconds
}

/** Open loop at a fixed rate for `seconds`; latency counted from each request's scheduled send time. */
async function openLoop(up: Upstream, rate: number, seconds: number, budgetMs: number): Promise<LoadResult> {
  const n = Math.round(rate * seconds)
  const t0 = Date.now() + 20
  const latencies: number[] = []
  const byWorker: Record<string, number> = {}
  let ok = 0
  let failed = 0
  const pending: Promise<void>[] = []
  for (let i = 0; i < n; i++) {
    const at = t0 + (i * 1000) / rate
    const wait = at - Date.now()
    if (wait > 1) {
      await new Promise((r) => setTimeout(r, wait))
    }
    pending.push(
      up
        .infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: at + budgetMs, items: [{ x: i }] }, budgetMs + 100, undefined)
        .then(
          (r) => {
            latencies.push(Date.now() - at)
            if (r.errors) {
              failed++
            } else {
              ok++
              byWorker[r.worker ?? '?'] = (byWorker[r.worker ?? '?'] ?? 0) + 1
            }
          },
          (e: unknown) => {
            latencies.push(Date.now() - at)
            failed++
            if (!(e instanceof CohortError)) {
              throw e
            }
          },
        ),
    )
  }
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  return { ok, failed, seconds, p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0, byWorker }
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
    up = new Upstream(transport, S, 2000)
  })
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await nc?.close()
    await nats?.stop()
  })

  it('two workers, one five times slower, reach 0.9 of the sum of their capacities', async () => {
    // Capacity of each alone (closed loop, enough outstanding requests to fill its batches).
    const fastAlone = startWorker(nats.url, 'fast', 20)
    procs.push(fastAlone)
    await fastAlone.waitFor(/serving/, 60_000)
    const capFast = await closedLoop(up, 4 * BATCH, 2.5)
    expect(await fastAlone.stop('SIGTERM')).toBe(0)
    const slow = startWorker(nats.url, 'slow', 100)
    procs.push(slow)
    await slow.waitFor(/serving/, 60_000)
    const capSlow = await closedLoop(up, 4 * BATCH, 2.5)
    const fast = startWorker(nats.url, 'fast', 20)
    procs.push(fast)
    await fast.waitFor(/serving/, 60_000)

    // Together, open loop at 95% of the summed capacity, with a 1 s deadline budget.
    const budget = 1000
    const sum = capFast + capSlow
    const r = await openLoop(up, 0.95 * sum, 4, budget)
    const goodput = r.ok / r.seconds
    console.log(
      `capacity fast ${capFast.toFixed(0)}/s, slow ${capSlow.toFixed(0)}/s; together ${goodput.toFixed(0)}/s ` +
        `(${(goodput / sum).toFixed(3)} of the sum), failed ${r.failed}, p99 ${r.p99} ms, by worker ${JSON.stringify(r.byWorker)}`,
    )
    expect(capFast / capSlow).toBeGreaterThan(2)
    expect(goodput).toBeGreaterThanOrEqual(0.9 * sum)
    // The slow worker's share is bounded by what it can finish: it does not hoard work.
    expect(r.byWorker['slow'] ?? 0).toBeLessThanOrEqual(capSlow * r.seconds * 1.25)
    expect(r.p99).toBeLessThanOrEqual(100 + budget)
  })

  it('follows runtime batching changes within a second, including a worker that joins later', async () => {
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
    while (Date.now() - t0 < 1000) {
      metas = await workerMetas(transport)
      if (Object.values(metas).length >= 2 && Object.values(metas).every((m) => m.maxBatchSize === 3 && m.policy === 'timer')) {
        break
      }
    }
    expect(Date.now() - t0).toBeLessThan(1000)
    expect(Object.keys(metas).sort()).toEqual(['fast', 'slow'])
    const late = startWorker(nats.url, 'late', 20)
    procs.push(late)
    await late.waitFor(/serving/, 60_000)
    const after = await workerMetas(transport)
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
