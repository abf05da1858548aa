import { describe, expect, it } from 'vitest'
import { CostModel } from './cost-model.ts'
import { harness, pushAll, type Harness } from './test-harness.ts'
import type { BatchEngineOptions } from './types.ts'

/** A model that has learned t(b) = 2 + b exactly (so upper(b) = 2 + b). */
function trained(): CostModel {
  const m = new CostModel()
  for (const b of [1, 4, 2, 8]) m.observe(b, 2 + b)
  return m
}

function edf(opts: Partial<BatchEngineOptions<string>> = {}): Harness<string> {
  return harness({ policy: 'deadline', costModel: trained(), ...opts })
}

describe("BatchEngine, 'deadline' policy (EDF / least slack)", () => {
  it('starts from a model that knows t(b) = 2 + b', () => {
    const m = trained()
    expect(m.a).toBeCloseTo(2, 9)
    expect(m.c).toBeCloseTo(1, 9)
    expect(m.upper(3)).toBeCloseTo(5, 9)
  })

  it('takes the largest batch whose upper cost meets its tightest deadline, earliest deadline first', async () => {
    const h = edf({ maxDelayMs: 0 })
    h.engine.push({ value: 'A', deadline: 20 })
    h.engine.push({ value: 'B', deadline: 8 })
    h.engine.push({ value: 'C', deadline: 30 })
    h.engine.push({ value: 'D', deadline: 5.5 })
    h.engine.push({ value: 'E', deadline: 40 })
    h.clock.flushDefers()
    // b=3 ends at 0 + 2 + 3 = 5 <= 5.5 (D); b=4 would end at 6 > 5.5.
    expect(h.runs[0]?.batch).toMatchObject({ items: ['D', 'B', 'A'], reason: 'deadline' })
    expect(h.expired).toEqual([])
    h.clock.advance(5)
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ items: ['C', 'E'], reason: 'idle', startedAt: 5 })
    expect(h.engine.stats.dispatched).toMatchObject({ deadline: 1, idle: 1 })
  })

  it("expires items that cannot make their deadline even alone as 'doomed', without running them", () => {
    const h = edf()
    h.engine.push({ value: 'past', deadline: 0 })
    h.engine.push({ value: 'doomed', deadline: 2.5 }) // 0 + upper(1) = 3 > 2.5
    h.engine.push({ value: 'ok', deadline: 3 })
    h.clock.flushDefers()
    expect(h.expired).toEqual([
      ['past', 'deadline'],
      ['doomed', 'doomed'],
    ])
    expect(h.items()).toEqual([['ok']])
    expect(h.engine.stats.expired).toEqual({ deadline: 1, cancelled: 0, closed: 0, doomed: 1 })
  })

  it('waits for company at most maxDelayMs after the oldest arrival', () => {
    const h = edf({ maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(0)
    expect(h.clock.timers.map((t) => t.due)).toEqual([5])
    h.clock.advance(3)
    pushAll(h, 'b')
    h.clock.advance(1.9)
    expect(h.runs).toHaveLength(0)
    h.clock.advance(0.1)
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], reason: 'timer', startedAt: 5, queuedMs: [5, 2] })
    expect(h.clock.timers).toHaveLength(0)
  })

  it('never waits past the latest start that still meets the tightest deadline', async () => {
    const h = edf({ maxDelayMs: 5 })
    h.engine.push({ value: 'a', deadline: 6 })
    h.clock.flushDefers()
    expect(h.clock.timers[0]?.due).toBeCloseTo(3, 9) // 6 - upper(1)
    h.clock.advance(1)
    pushAll(h, 'b')
    h.clock.flushDefers()
    expect(h.clock.timers).toHaveLength(1)
    expect(h.clock.timers[0]?.due).toBeCloseTo(2, 9) // 6 - upper(2): company shortens the wait
    h.clock.advance(1)
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], reason: 'deadline' })
    expect(h.runs[0]?.batch.startedAt).toBeCloseTo(2, 9)
    h.clock.advance(4)
    await h.complete() // ends at 6: on time
    expect(h.engine.costModel.samples).toBe(5)
  })

  it('dispatches at once when the batch is full, or when maxDelayMs is 0', () => {
    const h = edf({ maxBatchSize: 2 })
    pushAll(h, 'a', 'b', 'c')
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], reason: 'full' })
    const z = edf({ maxDelayMs: 0 })
    pushAll(z, 'a')
    z.clock.flushDefers()
    expect(z.runs[0]?.batch).toMatchObject({ items: ['a'], reason: 'idle' })
  })

  it('behaves like eager before the first cost sample: no wait, no doomed items', async () => {
    const h = harness({ policy: 'deadline', maxDelayMs: 5 })
    h.engine.push({ value: 'tight', deadline: 0.001 })
    h.engine.push({ value: 'loose', deadline: 100 })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['tight', 'loose'], reason: 'idle' })
    expect(h.clock.timers).toHaveLength(0)
    h.clock.advance(3)
    await h.complete()
    expect(h.engine.costModel.samples).toBe(1)
    expect(h.engine.costModel.c).toBe(1.5) // 3 ms for 2 items, a = 0 with one size only
  })

  it('puts priority before deadline, in the batch and across groups', async () => {
    const h = edf({ maxDelayMs: 0 })
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'p0-early', deadline: 50 })
    h.engine.push({ value: 'p1-late', deadline: 90, priority: 1 })
    h.engine.push({ value: 'y-early', deadline: 40, group: 'y' })
    h.engine.push({ value: 'p1-later', deadline: 95, priority: 1 })
    h.clock.advance(3)
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ group: '', items: ['p1-late', 'p1-later', 'p0-early'] })
    h.clock.advance(5)
    await h.complete()
    expect(h.runs[2]?.batch).toMatchObject({ group: 'y', items: ['y-early'] })
  })

  it('lets a ready group go while another waits for company', () => {
    const h = edf({ maxBatchSize: 2, maxDelayMs: 5 })
    h.engine.push({ value: 'x1', deadline: Infinity, group: 'x', priority: 1 })
    h.engine.push({ value: 'y1', deadline: Infinity, group: 'y' })
    h.engine.push({ value: 'y2', deadline: Infinity, group: 'y' })
    h.clock.flushDefers()
    expect(h.items()).toEqual([['y1', 'y2']])
    expect(h.engine.queued).toBe(1)
  })

  it('under overload, drops the items a full batch would finish late, so that full batches form', async () => {
    const h = edf({ maxBatchSize: 2, maxDelayMs: 0 })
    h.engine.costModel.observe(1, 3) // 5 samples: overload drops are on
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'a', deadline: 7.5 }) // in a pair (from t=3): ends at 3 + 4 = 7, on time
    h.engine.push({ value: 'b', deadline: 6.5 }) // alone it would make it (6), in a pair (7) not
    h.engine.push({ value: 'c', deadline: 50 })
    h.clock.advance(3)
    await h.complete()
    expect(h.expired).toEqual([['b', 'doomed']])
    expect(h.runs[1]?.batch).toMatchObject({ items: ['a', 'c'], reason: 'full' })
  })

  it('feeds the cost model with service time only (dispatch to settle), not queueing time', async () => {
    const seen: [number, number][] = []
    class Spy extends CostModel {
      override observe(size: number, ms: number): void {
        seen.push([size, ms])
        super.observe(size, ms)
      }
    }
    const h = harness({ costModel: new Spy() })
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b', 'c') // queued for 7 ms behind 'a'
    h.clock.advance(7)
    await h.complete()
    h.clock.advance(4)
    await h.complete()
    pushAll(h, 'd')
    h.clock.flushDefers()
    h.clock.advance(1)
    await h.fail(new Error('boom')) // failed runs teach nothing
    expect(seen).toEqual([
      [1, 7],
      [2, 4],
    ])
    expect(h.engine.costModel.samples).toBe(2)
    // (1, 7) then (2, 4): a negative slope is clamped to c = 0, a = the weighted mean time.
    expect(h.engine.costModel.c).toBe(0)
    expect(h.engine.costModel.a).toBeCloseTo((0.98 * 7 + 4) / 1.98, 9)
  })

  it('can be switched on at run time', () => {
    const h = harness({ costModel: trained() })
    h.engine.configure({ policy: 'deadline', maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(0)
    h.engine.configure({ policy: 'eager' })
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a']])
  })
})
