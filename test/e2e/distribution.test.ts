// Capacity-aware distribution and runtime reconfiguration over real NATS with worker processes.
// Counts and orders only; the rates (goodput against summed capacity, p99) are in
// test/bench/distribution.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createApp, createGatewayCore, type Upstream } from '@cohort/gateway'
import { CohortError, decodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const S = subjects()
const BATCH = 16

function startWorker(nats: string, id: string, sleepMs: number, extra: string[] = []): CliProcess {
  return spawnCohort(['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', String(BATCH), ...extra], {
    SLEEPY_MS: String(sleepMs),
  })
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
    await ifStarted(nc)?.close()
    await ifStarted(nats)?.stop()
  })

  /** A worker's `$SRV.STATS`: requests received, and items it holds (queued and running). */
  async function stats(id: string): Promise<{ requests: number; held: number }> {
    const m = await nc.request(`$SRV.STATS.cohort-worker.${id}`, new Uint8Array(0), { timeout: 10_000 })
    const e = m.json<{ endpoints: { num_requests: number; data: { queued: number; running: number } }[] }>().endpoints[0]!
    return { requests: e.num_requests, held: e.data.queued + e.data.running }
  }
  async function until(ok: () => Promise<boolean>, what: string): Promise<void> {
    for (const end = Date.now() + 30_000; !(await ok()); await new Promise((r) => setTimeout(r, 20))) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    }
  }
  /**
   * A slow worker made full (40 requests it holds for 10 min: 16 running, 24 queued, past its high
   * water of 2 x 16), then a fast one with room; then 24 requests, each its own NATS message (no
   * worker-loss detection here: protocol v1, no packs). Returns who answered each (or its error
   * code: one the slow worker took times out after `timeoutMs`) and how many the slow worker got.
   */
  async function fullThenRoom(slowId: string, fastId: string, extra: string[], timeoutMs: number) {
    const slow = startWorker(nats.url, slowId, 600_000, ['--batch-timeout-ms', '0', ...extra])
    procs.push(slow)
    await slow.waitFor(/serving/, 60_000)
    for (let i = 0; i < 40; i++) {
      void up.infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + 1_200_000, items: [{ x: i }] }, 1_200_000, undefined).catch(() => undefined)
    }
    await until(
      () =>
        stats(slowId).then(
          (s) => s.held === 40,
          () => false,
        ),
      `${slowId} to hold 40`,
    )
    const before = (await stats(slowId)).requests
    const fast = startWorker(nats.url, fastId, 20, extra)
    procs.push(fast)
    await fast.waitFor(/serving/, 60_000)
    // Its model subscriptions are at the server once its services answer (same connection, after them).
    await until(
      () =>
        stats(fastId).then(
          () => true,
          () => false,
        ),
      `${fastId} to answer $SRV.STATS`,
    )
    const code = (e: unknown) => (e instanceof CohortError ? e.code : String(e))
    const who = await Promise.all(
      Array.from({ length: 24 }, (_, x) =>
        up
          .infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + timeoutMs, items: [{ x }] }, timeoutMs, undefined)
          .then((r) => (r.errors?.[0] ? `${r.worker} ${r.errors[0].code}` : (r.worker ?? '?')), code),
      ),
    )
    const by: Record<string, number> = {}
    for (const w of who) by[w] = (by[w] ?? 0) + 1
    return { by, slowGot: (await stats(slowId)).requests - before }
  }

  it('capacity-aware distribution sends nothing to a full worker while another has room; random still sends it some', async () => {
    // Counts, not rates (throughput and latency of the two modes: test/bench/distribution.ts).
    // NATS hands each message of a queue group to a member at random: with --distribution random
    // the full slow worker takes each of the 24 with probability 1/2, so "it took at least one"
    // misses with probability 2^-24 (6e-8); capacity-aware, it stopped listening while full, so it
    // takes none (the same 2^-24 for a worker that kept listening).
    const random = await fullThenRoom('slow-r', 'fast-r', ['--distribution', 'random'], 10_000)
    console.log(`random: ${JSON.stringify(random)}`)
    expect(random.slowGot).toBeGreaterThan(0)
    expect(random.by['fast-r']).toBe(24 - random.slowGot)
    for (const p of procs.splice(0)) await p.stop('SIGKILL')

    const capacity = await fullThenRoom('slow', 'fast', [], 30_000)
    expect(capacity).toEqual({ by: { fast: 24 }, slowGot: 0 })
  }, 180_000)

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
