// Fair shares across several workers (docs/batching.md#fair-shares-between-tenants), simulated on
// fake clocks: W engines (one per worker), each with its own start-time fair queue, behind
// gateways that hand each pack to a random worker, as a NATS queue group does. Two tenants: a
// flood at 3x the total capacity and a quiet one at 15 %, 500 ms deadlines, the affine cost
// t(b) = 5 + 0.5 b ms, batches of up to 32. Each engine's fair queue is local, yet with random
// routing every worker sees the same mix in expectation, so the quiet tenant stays under its fair
// share on every worker and is served. Counts on fake clocks: deterministic, no machine timing.
import { describe, expect, it } from 'vitest'
import { harness, type Harness } from './test-harness.ts'

type V = { t: 'flood' | 'quiet'; deadline: number }

/** Seeded PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Poisson-distributed count with mean `mean` (Knuth; small means). */
function poisson(rand: () => number, mean: number): number {
  const l = Math.exp(-mean)
  let k = 0
  let p = 1
  do {
    k++
    p *= rand()
  } while (p > l)
  return k - 1
}

const cost = (b: number) => 5 + 0.5 * b
const MAX_BATCH = 32
/** One engine's capacity, items/ms: full batches back to back. */
const PER_WORKER = MAX_BATCH / cost(MAX_BATCH)

interface SimResult {
  sent: Record<V['t'], number>
  good: Record<V['t'], number>
  /** Items each worker was handed. */
  perWorker: number[]
}

/**
 * `workers` engines and `gateways` gateways for `ms` of fake time: each ms, each gateway packs the
 * arrivals it got that ms (tenants round robin over the gateways) and hands the pack to a random
 * worker. `fair: false` drops the tenant (one FIFO queue): the control.
 */
async function simulate(workers: number, gateways: number, o: { ms?: number; seed?: number; fair?: boolean } = {}): Promise<SimResult> {
  const ms = o.ms ?? 2000
  const rand = prng(o.seed ?? 1)
  const capacity = workers * PER_WORKER
  const rates = { flood: 3 * capacity, quiet: 0.15 * capacity }
  const res: SimResult = { sent: { flood: 0, quiet: 0 }, good: { flood: 0, quiet: 0 }, perWorker: Array(workers).fill(0) }
  const hs: Harness<V>[] = []
  for (let w = 0; w < workers; w++) {
    const h = harness<V>({ maxBatchSize: MAX_BATCH })
    for (let i = 0; i < 8; i++) h.engine.costModel.observe(1 + i * 4, cost(1 + i * 4))
    hs.push(h)
  }
  const running = new Map<Harness<V>, number>()
  let rr = 0
  for (let now = 0; now < ms; now++) {
    const packs: V[][] = Array.from({ length: gateways }, () => [])
    for (const t of ['flood', 'quiet'] as const) {
      for (let n = poisson(rand, rates[t]); n > 0; n--) {
        packs[rr++ % gateways]!.push({ t, deadline: now + 500 })
        res.sent[t]++
      }
    }
    for (const pack of packs) {
      if (pack.length === 0) continue
      const w = Math.floor(rand() * workers)
      const h = hs[w]!
      res.perWorker[w]! += pack.length
      for (const v of pack) h.engine.offer({ value: v, deadline: v.deadline, ...(o.fair === false ? {} : { tenant: v.t }) })
    }
    for (const h of hs) {
      h.clock.flushDefers()
      const run = h.pending()[0]
      if (run !== undefined && !running.has(h)) running.set(h, run.at + cost(run.batch.items.length))
      const end = running.get(h)
      if (end !== undefined && end <= now + 1) {
        h.clock.advance(end - h.clock.now())
        for (const v of run!.batch.items) if (h.clock.now() <= v.deadline) res.good[v.t]++
        running.delete(h)
        await h.complete()
      }
      h.clock.advance(now + 1 - h.clock.now())
    }
  }
  return res
}

describe('fair shares across workers (simulated: per-worker fair queues, random routing of packs)', () => {
  it('the quiet tenant is served on time with 1 worker and with 2 workers behind 2 gateways; one FIFO queue starves it', async () => {
    const one = await simulate(1, 1)
    const two = await simulate(2, 2)
    const fifo = await simulate(2, 2, { fair: false })
    const quiet = (r: SimResult) => r.good.quiet / r.sent.quiet
    expect(one.sent.quiet).toBeGreaterThan(100)
    expect(quiet(one)).toBeGreaterThan(0.95)
    expect(quiet(two)).toBeGreaterThan(0.95)
    expect(quiet(fifo)).toBeLessThan(0.5)
    // Each tenant's share of the good answers is its max-min fair share (the quiet tenant sent
    // less than half: it is owed all it sent) to within 0.01, with one worker as with two.
    for (const r of [one, two]) {
      const good = r.good.flood + r.good.quiet
      expect(Math.abs(r.good.quiet / good - Math.min(r.sent.quiet, good / 2) / good)).toBeLessThan(0.01)
    }
    // The flood gets the rest of the capacity: most of each worker's batch slots.
    expect(two.good.flood).toBeGreaterThan(0.7 * 2 * PER_WORKER * 2000)
    // Random routing split the packs about evenly.
    expect(Math.abs(two.perWorker[0]! - two.perWorker[1]!) / (two.perWorker[0]! + two.perWorker[1]!)).toBeLessThan(0.05)
  })
})
