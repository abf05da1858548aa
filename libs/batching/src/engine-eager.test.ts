import { describe, expect, it } from 'vitest'
import { harness, pushAll } from './test-harness.ts'

describe('BatchEngine, eager policy', () => {
  it('dispatches a lone item on an idle engine after the defer, without any timer', () => {
    const h = harness()
    expect(h.engine.config.policy).toBe('eager')
    expect(h.engine.push({ value: 'a', deadline: Infinity })).toBe(true)
    expect(h.runs).toHaveLength(0) // not synchronously inside push
    expect(h.clock.pendingDefers).toBe(1)
    expect(h.clock.timers).toHaveLength(0)
    h.clock.flushDefers()
    expect(h.clock.now()).toBe(0)
    expect(h.runs).toHaveLength(1)
    expect(h.runs[0]?.batch).toEqual({ items: ['a'], group: '', reason: 'idle', startedAt: 0, queuedMs: [0], cost: 1 })
    expect(h.engine.queued).toBe(0)
    expect(h.engine.running).toBe(1)
    expect(h.clock.timers).toHaveLength(0)
  })

  it('puts items pushed in the same turn into one batch (one defer)', () => {
    const h = harness()
    pushAll(h, 'a', 'b', 'c')
    expect(h.clock.pendingDefers).toBe(1)
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a', 'b', 'c']])
    expect(h.runs[0]?.batch.reason).toBe('idle')
  })

  it('lets the queue grow while busy and takes it all when the slot frees', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b', 'c')
    h.clock.flushDefers()
    h.clock.advance(3)
    pushAll(h, 'd', 'e')
    h.clock.advance(4)
    expect(h.runs).toHaveLength(1)
    expect(h.engine.queued).toBe(4)
    expect(h.clock.timers).toHaveLength(0) // no deadlines: nothing to wake for
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b', 'c', 'd', 'e']])
    expect(h.runs[1]?.batch).toMatchObject({ reason: 'idle', startedAt: 7, queuedMs: [7, 7, 4, 4] })
  })

  it('splits a backlog larger than maxBatchSize across successive runs', async () => {
    const h = harness({ maxBatchSize: 2 })
    pushAll(h, 'a', 'b', 'c', 'd', 'e')
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a', 'b']])
    expect(h.engine.queued).toBe(3)
    await h.complete()
    expect(h.items()).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ])
    await h.complete()
    expect(h.items()).toEqual([['a', 'b'], ['c', 'd'], ['e']])
    expect(h.runs.map((r) => r.batch.reason)).toEqual(['full', 'full', 'idle'])
    expect(h.engine.stats.dispatched).toEqual({ idle: 1, full: 2, timer: 0, deadline: 0 })
  })

  it("reports 'full' when the batch reaches maxBatchSize exactly", () => {
    const h = harness({ maxBatchSize: 3 })
    pushAll(h, 'a', 'b', 'c')
    h.clock.flushDefers()
    expect(h.runs[0]?.batch.reason).toBe('full')
    expect(h.engine.stats).toMatchObject({ batches: 1, items: 3 })
  })

  it('never mixes groups in one batch', async () => {
    const h = harness()
    h.engine.push({ value: 'a1', deadline: Infinity, group: 'a' })
    h.engine.push({ value: 'b1', deadline: Infinity, group: 'b' })
    h.engine.push({ value: 'a2', deadline: Infinity, group: 'a' })
    h.engine.push({ value: 'd1', deadline: Infinity })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a1', 'a2'], group: 'a' })
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ items: ['b1'], group: 'b' })
    await h.complete()
    expect(h.runs[2]?.batch).toMatchObject({ items: ['d1'], group: '' })
  })

  it('fills a batch in (priority desc, arrival) order', () => {
    const h = harness()
    h.engine.push({ value: 'a', deadline: Infinity })
    h.engine.push({ value: 'b', deadline: Infinity, priority: 2 })
    h.engine.push({ value: 'c', deadline: Infinity, priority: 1 })
    h.engine.push({ value: 'd', deadline: Infinity, priority: 2 })
    h.engine.push({ value: 'e', deadline: Infinity, priority: -1 })
    h.clock.flushDefers()
    expect(h.items()).toEqual([['b', 'd', 'c', 'a', 'e']])
  })

  it('takes the highest-priority items first when the batch is capped', async () => {
    const h = harness({ maxBatchSize: 2 })
    h.engine.push({ value: 'a', deadline: Infinity })
    h.engine.push({ value: 'b', deadline: Infinity })
    h.engine.push({ value: 'c', deadline: Infinity, priority: 1 })
    h.clock.flushDefers()
    expect(h.items()).toEqual([['c', 'a']])
    await h.complete()
    expect(h.items()[1]).toEqual(['b'])
  })

  it('chooses the group of the highest-priority item, then of the oldest item', async () => {
    const h = harness()
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'x1', deadline: Infinity, group: 'x' })
    h.engine.push({ value: 'y1', deadline: Infinity, group: 'y', priority: 1 })
    h.engine.push({ value: 'z1', deadline: Infinity, group: 'z' })
    h.engine.push({ value: 'x2', deadline: Infinity, group: 'x' })
    await h.complete()
    expect(h.runs[1]?.batch).toMatchObject({ group: 'y', items: ['y1'] })
    await h.complete()
    expect(h.runs[2]?.batch).toMatchObject({ group: 'x', items: ['x1', 'x2'] }) // x1 older than z1
    await h.complete()
    expect(h.runs[3]?.batch).toMatchObject({ group: 'z', items: ['z1'] })
  })

  it('runs up to `concurrency` batches at once', async () => {
    const h = harness({ concurrency: 2 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b')
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a'], ['b']])
    expect(h.engine.running).toBe(2)
    pushAll(h, 'c', 'd')
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(2)
    expect(h.engine.queued).toBe(2)
    await h.complete(1)
    expect(h.items()).toEqual([['a'], ['b'], ['c', 'd']])
    expect(h.engine.running).toBe(2)
    await h.complete()
    await h.complete()
    expect(h.engine.running).toBe(0)
  })

  it('fills every free slot from one backlog', () => {
    const h = harness({ concurrency: 3, maxBatchSize: 2 })
    pushAll(h, 'a', 'b', 'c', 'd', 'e')
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a', 'b'], ['c', 'd'], ['e']])
    expect(h.engine.running).toBe(3)
  })

  it('dispatches a freed slot after the defer, so same-turn arrivals join', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b')
    h.runs[0]?.resolve()
    await Promise.resolve()
    await Promise.resolve()
    expect(h.engine.running).toBe(0)
    pushAll(h, 'c') // same turn as the completion
    expect(h.runs).toHaveLength(1)
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a'], ['b', 'c']])
  })
})
