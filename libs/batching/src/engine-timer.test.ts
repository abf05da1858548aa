import { describe, expect, it } from 'vitest'
import { harness, pushAll } from './test-harness.ts'

describe('BatchEngine, timer policy', () => {
  it('waits maxDelayMs even when idle, then dispatches with reason timer', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(0)
    expect(h.clock.timers).toEqual([{ due: 5, seq: 0 }])
    h.clock.advance(4)
    expect(h.runs).toHaveLength(0)
    pushAll(h, 'b')
    h.clock.advance(1)
    expect(h.items()).toEqual([['a', 'b']])
    expect(h.runs[0]?.batch).toMatchObject({ reason: 'timer', startedAt: 5, queuedMs: [5, 1] })
    expect(h.clock.timers).toHaveLength(0)
  })

  it('dispatches early, without waiting, once a group holds maxBatchSize items', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5, maxBatchSize: 3 })
    pushAll(h, 'a', 'b')
    h.clock.advance(2)
    pushAll(h, 'c', 'd')
    h.clock.flushDefers()
    expect(h.items()).toEqual([['a', 'b', 'c']])
    expect(h.runs[0]?.batch).toMatchObject({ reason: 'full', startedAt: 2 })
    expect(h.engine.queued).toBe(1) // d waits for its slot (and its own delay)
  })

  it('dispatches only when a slot is free, and arms no delay timer while busy', async () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.advance(5)
    expect(h.items()).toEqual([['a']])
    pushAll(h, 'b')
    h.clock.flushDefers()
    expect(h.clock.timers).toHaveLength(0) // busy: only completion can dispatch
    h.clock.advance(20)
    expect(h.runs).toHaveLength(1)
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b']])
    expect(h.runs[1]?.batch).toMatchObject({ reason: 'timer', startedAt: 25, queuedMs: [20] })
  })

  it('after a slot frees, a group that has not waited long enough still waits', async () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.advance(5)
    h.clock.advance(3)
    pushAll(h, 'b') // at t=8, due at 13
    await h.complete()
    expect(h.runs).toHaveLength(1)
    expect(h.clock.timers.map((t) => t.due)).toEqual([13])
    h.clock.advance(5)
    expect(h.items()).toEqual([['a'], ['b']])
  })

  it('times each group from its own oldest item', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5, concurrency: 2 })
    h.engine.push({ value: 'x1', deadline: Infinity, group: 'x' })
    h.clock.advance(2)
    h.engine.push({ value: 'y1', deadline: Infinity, group: 'y' })
    h.engine.push({ value: 'x2', deadline: Infinity, group: 'x' })
    h.clock.advance(3)
    expect(h.runs.map((r) => r.batch)).toMatchObject([{ group: 'x', items: ['x1', 'x2'], startedAt: 5 }])
    expect(h.clock.timers.map((t) => t.due)).toEqual([7])
    h.clock.advance(2)
    expect(h.runs[1]?.batch).toMatchObject({ group: 'y', items: ['y1'], startedAt: 7, reason: 'timer' })
  })

  it('counts the delay from the oldest item even when a higher priority arrives later', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    pushAll(h, 'a')
    h.clock.advance(4)
    h.engine.push({ value: 'b', deadline: Infinity, priority: 9 })
    h.clock.advance(1)
    expect(h.items()).toEqual([['b', 'a']])
  })

  it('with maxDelayMs 0 behaves like eager but reports timer', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 0 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a'], reason: 'timer', startedAt: 0 })
  })

  it('with maxDelayMs Infinity dispatches only full groups', () => {
    const h = harness({ policy: 'timer', maxDelayMs: Infinity, maxBatchSize: 2 })
    pushAll(h, 'a')
    h.clock.advance(1e9)
    expect(h.runs).toHaveLength(0)
    expect(h.clock.timers).toHaveLength(0)
    pushAll(h, 'b')
    h.clock.flushDefers()
    expect(h.runs[0]?.batch.reason).toBe('full')
  })

  it('switching to eager dispatches at the next defer when a slot is free', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 50 })
    pushAll(h, 'a', 'b')
    h.clock.advance(1)
    expect(h.runs).toHaveLength(0)
    h.engine.configure({ policy: 'eager' })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], reason: 'idle', startedAt: 1 })
    expect(h.clock.timers).toHaveLength(0)
  })

  it('switching eager to timer makes later items wait', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.configure({ policy: 'timer', maxDelayMs: 10 })
    pushAll(h, 'b')
    await h.complete()
    expect(h.runs).toHaveLength(1)
    h.clock.advance(10)
    expect(h.runs[1]?.batch).toMatchObject({ items: ['b'], reason: 'timer' })
  })

  it('changing maxDelayMs re-arms the timer', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 10 })
    pushAll(h, 'a')
    h.clock.flushDefers()
    expect(h.clock.timers.map((t) => t.due)).toEqual([10])
    h.engine.configure({ maxDelayMs: 2 })
    h.clock.flushDefers()
    expect(h.clock.timers.map((t) => t.due)).toEqual([2])
    h.clock.advance(2)
    expect(h.items()).toEqual([['a']])
  })

  it('lowering maxBatchSize can make a waiting group full', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 10, maxBatchSize: 8 })
    pushAll(h, 'a', 'b', 'c')
    h.clock.advance(1)
    h.engine.configure({ maxBatchSize: 2 })
    h.clock.flushDefers()
    expect(h.runs[0]?.batch).toMatchObject({ items: ['a', 'b'], reason: 'full', startedAt: 1 })
  })
})
