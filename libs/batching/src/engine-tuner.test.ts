import { describe, expect, it } from 'vitest'
import { BatchTuner, capLevels, type CapChange } from './batch-tuner.ts'
import { harness, type Harness } from './test-harness.ts'

/**
 * Keep the engine saturated for `batches` batches: before each one, top the queue up with items
 * whose deadline is `budgetMs` after their arrival, then let the running batch take `t(size)` ms.
 * Returns the size of every batch run.
 */
async function saturate(h: Harness<number>, t: (b: number) => number, batches: number, budgetMs = Infinity, fill = 600): Promise<number[]> {
  const sizes: number[] = []
  let v = 0
  for (let i = 0; i < batches; i++) {
    const now = h.clock.now()
    for (let k = h.engine.queued; k < fill; k++) {
      h.engine.push({ value: v++, deadline: now + budgetMs })
    }
    h.clock.flushDefers()
    const run = h.pending()[0]
    if (run === undefined) {
      throw new Error('nothing running under saturation')
    }
    sizes.push(run.batch.items.length)
    h.clock.advance(t(run.batch.items.length))
    await h.complete()
  }
  return sizes
}

/** A model whose per-item cost falls with the batch size: t(b) = 10 + 0.2·b ms. */
const affine = (b: number) => 10 + 0.2 * b
/** Like the heavy MLP measured offline: per-item cost falls up to 128, then rises (cache). */
const cacheBound = (b: number) => 3 + 0.25 * b + (b > 128 ? 0.002 * (b - 128) ** 2 : 0)

function tuned(maxBatchSize: number, changes: CapChange[] = []): Harness<number> {
  return harness<number>({ maxBatchSize, autoBatchSize: true, admission: false, onCapChange: (c) => changes.push(c) })
}

describe('BatchEngine, self-tuned batch cap (autoBatchSize)', () => {
  it('starts at 32 and converges up to the limit for a model whose per-item cost keeps falling', async () => {
    const changes: CapChange[] = []
    const h = tuned(256, changes)
    expect(h.engine.batchCap).toBe(32)
    expect(h.engine.config.maxBatchSize).toBe(256)
    const sizes = await saturate(h, affine, 60)
    expect(sizes[0]).toBe(32)
    expect(h.engine.batchCap).toBe(256)
    expect(sizes.slice(-5)).toEqual([256, 256, 256, 256, 256])
    expect(changes.map((c) => [c.from, c.to, c.reason])).toEqual([
      [32, 64, 'explore'],
      [64, 128, 'explore'],
      [128, 256, 'explore'],
    ])
    expect(h.engine.tuner?.changes).toEqual({ explore: 3, throughput: 0, budget: 0, limit: 0 })
    // The figures behind the last change: items/ms measured at 128 (128 / 35.6).
    expect(changes[2]?.fromRate).toBeCloseTo(128 / affine(128), 9)
  })

  it('settles on the best size when the per-item cost rises past it, and retries it ever less often (hold 32, 64, 128 batches)', async () => {
    const changes: CapChange[] = []
    const h = tuned(512, changes)
    const sizes = await saturate(h, cacheBound, 400)
    expect(h.engine.batchCap).toBe(128)
    const moves = changes.map((c) => [c.from, c.to, c.reason])
    expect(moves.slice(0, 4)).toEqual([
      [32, 64, 'explore'],
      [64, 128, 'explore'],
      [128, 256, 'explore'],
      [256, 128, 'throughput'],
    ])
    // Every later move is a retry of 256 (8 batches) and its rejection.
    expect(moves.slice(4)).toEqual(Array.from({ length: moves.length - 4 }, (_, k) => (k % 2 === 0 ? [128, 256, 'explore'] : [256, 128, 'throughput'])))
    // Batches run at 128 between a rejection and the next retry: the hold doubles each time.
    const runs: number[] = []
    let n = 0
    for (const s of sizes.slice(32)) {
      if (s === 128) {
        n++
      } else if (n > 0) {
        runs.push(n)
        n = 0
      }
    }
    expect(runs).toEqual([32, 64, 128])
    expect(sizes.slice(-20).every((s) => s === 128)).toBe(true)
  })

  it('recovers soon from a size judged on noisy batches: it is tried again after 32 batches, not holdBatches', async () => {
    const changes: CapChange[] = []
    const h = tuned(256, changes)
    // The first 40 batches run on a cold process: 64 serves more than 32 (0.4 against 0.6 ms per
    // item), 128 looks no better than 64; then the model's own affine curve, where 128 and 256 serve more.
    let batches = 0
    const cold = (b: number) => (batches++ < 40 ? (b <= 32 ? 0.6 : 0.4) * b : affine(b))
    await saturate(h, cold, 120)
    expect(changes.map((c) => [c.from, c.to, c.reason]).slice(0, 3)).toEqual([
      [32, 64, 'explore'],
      [64, 128, 'explore'],
      [128, 64, 'throughput'],
    ])
    expect(h.engine.batchCap).toBe(256)
    expect(h.engine.tuner?.changes.throughput).toBe(1)
  })

  it('treats a user-set maxBatchSize as a hard cap', async () => {
    const h = tuned(64)
    const sizes = await saturate(h, affine, 40)
    expect(Math.max(...sizes)).toBe(64)
    expect(h.engine.batchCap).toBe(64)
    expect(h.engine.tuner?.curve().map((p) => p.size)).toEqual([32, 64])
  })

  it("stays low while the latency budget binds: 2 · t(cap) must fit the items' budget", async () => {
    const changes: CapChange[] = []
    const h = tuned(256, changes)
    // Budget 30 ms: t(32) = 16.4 ms breaks 2·t <= 30, t(16) = 13.2 ms fits, t(32) scaled from 16 does not.
    const sizes = await saturate(h, affine, 60, 30)
    expect(h.engine.batchCap).toBe(16)
    expect(changes.map((c) => [c.from, c.to, c.reason])).toEqual([[32, 16, 'budget']])
    expect(changes[0]?.budgetMs).toBe(30)
    expect(sizes.slice(-20).every((s) => s <= 16)).toBe(true)
    expect(h.engine.tuner?.changes.explore).toBe(0)
  })

  it('grows once the budget allows it again', async () => {
    const h = tuned(256)
    await saturate(h, affine, 20, 30)
    expect(h.engine.batchCap).toBe(16)
    await saturate(h, affine, 80, 2000)
    expect(h.engine.batchCap).toBe(256)
  })

  it('does not move without load (batches below the cap)', async () => {
    const h = tuned(256)
    for (let i = 0; i < 50; i++) {
      h.engine.push({ value: i, deadline: Infinity })
      h.clock.flushDefers()
      h.clock.advance(affine(1))
      await h.complete()
    }
    expect(h.engine.batchCap).toBe(32)
    expect(h.engine.tuner?.changes).toEqual({ explore: 0, throughput: 0, budget: 0, limit: 0 })
  })

  it('clamps the cap when maxBatchSize is lowered, and can be switched off', async () => {
    const changes: CapChange[] = []
    const h = tuned(256, changes)
    await saturate(h, affine, 30)
    expect(h.engine.batchCap).toBe(256)
    h.engine.configure({ maxBatchSize: 100 })
    expect(h.engine.batchCap).toBe(100)
    expect(changes.at(-1)).toMatchObject({ from: 256, to: 100, reason: 'limit' })
    h.engine.configure({ autoBatchSize: false, maxBatchSize: 200 })
    expect(h.engine.tuner).toBeUndefined()
    expect(h.engine.batchCap).toBe(200)
    // The first batch was dispatched (at 256) before the changes; the next ones follow them.
    const sizes = await saturate(h, affine, 4)
    expect(sizes).toEqual([256, 200, 200, 200])
  })

  it('keeps the cap when maxBatchSize is raised, then explores up to the new limit', async () => {
    const changes: CapChange[] = []
    const h = tuned(64, changes)
    await saturate(h, affine, 20)
    expect(h.engine.batchCap).toBe(64)
    const before = changes.length
    h.engine.configure({ maxBatchSize: 256 })
    expect(h.engine.batchCap).toBe(64)
    expect(changes).toHaveLength(before)
    await saturate(h, affine, 40)
    expect(h.engine.batchCap).toBe(256)
    expect(changes.slice(before).map((c) => c.reason)).toEqual(['explore', 'explore'])
  })

  it('keeps the cost model independent of the cap (its estimate at the limit is always there)', async () => {
    const h = tuned(256)
    await saturate(h, affine, 20, 30)
    expect(h.engine.batchCap).toBe(16)
    // The affine cost model learned from batches of 32 and 16 extrapolates to the limit.
    expect(h.engine.costModel.estimate(h.engine.config.maxBatchSize)).toBeCloseTo(affine(256), 6)
  })

  it('is off by default: batches take maxBatchSize', async () => {
    const h = harness<number>({ maxBatchSize: 256, admission: false })
    expect(h.engine.tuner).toBeUndefined()
    const sizes = await saturate(h, affine, 2)
    expect(sizes).toEqual([256, 256])
  })
})

describe('BatchTuner', () => {
  it('moves over powers of two and the limit', () => {
    expect(capLevels(1)).toEqual([1])
    expect(capLevels(100)).toEqual([1, 2, 4, 8, 16, 32, 64, 100])
    expect(capLevels(64)).toEqual([1, 2, 4, 8, 16, 32, 64])
    expect(new BatchTuner({ limit: 8 }).cap).toBe(8)
    expect(new BatchTuner({ limit: 100, start: 50 }).cap).toBe(32)
  })

  it('rejects options outside their range', () => {
    expect(() => new BatchTuner({ limit: 0 })).toThrow(RangeError)
    expect(() => new BatchTuner({ limit: 8, samples: 0 })).toThrow(RangeError)
    expect(() => new BatchTuner({ limit: 8, minGain: -1 })).toThrow(RangeError)
  })

  it('judges a size only on batches that filled it', () => {
    const t = new BatchTuner({ limit: 64, samples: 2 })
    for (let i = 0; i < 10; i++) expect(t.observe(20, 5, Infinity, 1, i)).toBeUndefined()
    expect(t.cap).toBe(32)
    t.observe(32, 8, Infinity, 1, 10)
    expect(t.observe(32, 8, Infinity, 1, 11)).toMatchObject({ from: 32, to: 64, reason: 'explore' })
  })
})
