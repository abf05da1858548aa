import { describe, expect, it } from 'vitest'
import { harness } from './test-harness.ts'

describe('BatchEngine, per-item cost and maxBatchCost', () => {
  it('splits batches by summed cost, in queue order, and reports a cost-capped batch as full', async () => {
    const h = harness({ maxBatchCost: 10 })
    for (const [value, cost] of [
      ['a', 4],
      ['b', 5],
      ['c', 3],
      ['d', 2],
      ['e', 6],
    ] as const) {
      h.engine.push({ value, deadline: Infinity, cost })
    }
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], cost: 9, reason: 'full' }) // + c = 12 > 10
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ items: ['c', 'd'], cost: 5, reason: 'full' }) // + e = 11 > 10
    await h.complete()
    expect(h.runs[2]?.batch).toMatchObject({ items: ['e'], cost: 6, reason: 'idle' })
  })

  it('admits an item whose cost alone exceeds the budget, alone', async () => {
    const h = harness({ maxBatchCost: 10 })
    h.engine.push({ value: 'huge', deadline: Infinity, cost: 25 })
    h.engine.push({ value: 'small', deadline: Infinity, cost: 1 })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['huge'], cost: 25, reason: 'full' })
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ items: ['small'], cost: 1 })
  })

  it('still caps the item count at maxBatchSize', () => {
    const h = harness({ maxBatchCost: 100, maxBatchSize: 2 })
    for (const value of ['a', 'b', 'c']) h.engine.push({ value, deadline: Infinity, cost: 1 })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], cost: 2, reason: 'full' })
  })

  it("under 'timer', a group whose cost fills a batch dispatches without waiting", () => {
    const h = harness({ policy: 'timer', maxDelayMs: 50, maxBatchCost: 8 })
    h.engine.push({ value: 'a', deadline: Infinity, cost: 3 })
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(0)
    h.engine.push({ value: 'b', deadline: Infinity, cost: 5 })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], cost: 8, reason: 'full' })
  })

  it("under 'deadline', fits the batch to both the cost budget and the deadline", () => {
    const h = harness({ policy: 'deadline', maxDelayMs: 0, maxBatchCost: 6 })
    for (const b of [1, 2, 4, 8]) h.engine.costModel.observe(b, 2 + b) // t = 2 + cost
    h.engine.push({ value: 'a', deadline: 7.5, cost: 2 })
    h.engine.push({ value: 'b', deadline: 20, cost: 3 })
    h.engine.push({ value: 'c', deadline: 20, cost: 1 })
    h.clock.flushDefers()
    // cost 5 ends at 7 <= 7.5; cost 6 would end at 8 > 7.5 (and would fit the budget).
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], cost: 5, reason: 'deadline' })
  })

  it('learns t over summed cost units', async () => {
    const h = harness()
    for (const [cost, ms] of [
      [4, 6],
      [10, 12],
      [2, 4],
    ] as const) {
      h.engine.push({ value: `x${cost}`, deadline: Infinity, cost })
      h.clock.flushDefers()
      h.clock.advance(ms)
      await h.complete()
    }
    expect(h.engine.costModel.samples).toBe(3)
    expect(h.engine.costModel.a).toBeCloseTo(2, 9) // t = 2 + 1 * cost
    expect(h.engine.costModel.c).toBeCloseTo(1, 9)
  })

  it('rejects a cost that is not a finite number > 0, queueing nothing', () => {
    const h = harness()
    for (const cost of [0, -1, Number.NaN, Infinity]) {
      expect(() => h.engine.push({ value: 'x', deadline: Infinity, cost })).toThrow(RangeError)
    }
    expect(() => h.engine.push({ value: 'x', deadline: Infinity, cost: '2' as never })).toThrow(RangeError)
    expect(h.engine.queued).toBe(0)
    expect(h.engine.push({ value: 'ok', deadline: Infinity, cost: 0.5 })).toBe(true)
  })

  it('changes maxBatchCost at run time', async () => {
    const h = harness()
    h.engine.push({ value: 'busy', deadline: Infinity })
    h.clock.flushDefers()
    for (const value of ['a', 'b', 'c']) h.engine.push({ value, deadline: Infinity, cost: 2 })
    h.engine.configure({ maxBatchCost: 4 })
    expect(h.engine.config.maxBatchCost).toBe(4)
    await h.complete()
    expect(h.items()[1]).toEqual(['a', 'b'])
    expect(() => h.engine.configure({ maxBatchCost: 0 })).toThrow(RangeError)
    expect(h.engine.config.maxBatchCost).toBe(4)
    h.engine.configure({ maxBatchCost: Infinity })
    expect(h.engine.config.maxBatchCost).toBe(Infinity)
  })
})

describe("BatchEngine, the executor's own time (Batch.serviceMs)", () => {
  it('learns the serviceMs a run reports instead of the wall time until it settled', async () => {
    const h = harness()
    for (let i = 0; i < 6; i++) {
      h.engine.push({ value: `x${i}`, deadline: Infinity })
      h.clock.flushDefers()
      const run = h.pending()[0]!
      run.batch.serviceMs = 0.5 // the executor's time; the answer waited 40 ms for the calling thread
      h.clock.advance(40)
      await h.complete()
    }
    expect(h.engine.costModel.samples).toBe(6)
    expect(h.engine.costModel.estimate(1)).toBeCloseTo(0.5)
  })

  it('learns the wall time when a run reports none', async () => {
    const h = harness()
    for (let i = 0; i < 6; i++) {
      h.engine.push({ value: `x${i}`, deadline: Infinity })
      h.clock.flushDefers()
      h.clock.advance(40)
      await h.complete()
    }
    expect(h.engine.costModel.estimate(1)).toBeCloseTo(40)
  })
})
