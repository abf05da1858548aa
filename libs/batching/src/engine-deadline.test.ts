import { describe, expect, it } from 'vitest'
import { harness, pushAll } from './test-harness.ts'

describe('BatchEngine, deadlines', () => {
  it('expires an item whose deadline passed before dispatch, instead of running it', () => {
    const h = harness({ start: 100 })
    h.engine.push({ value: 'late', deadline: 100 }) // deadline <= now
    h.engine.push({ value: 'ok', deadline: 101 })
    h.clock.flushDefers()
    expect(h.expired).toEqual([['late', 'deadline']])
    expect(h.items()).toEqual([['ok']])
    expect(h.engine.stats.expired.deadline).toBe(1)
  })

  it('checks deadlines at dispatch time when a slot frees', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: 10 })
    h.engine.push({ value: 'c', deadline: 20 })
    h.clock.advance(9)
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b', 'c']])
    expect(h.expired).toEqual([])
  })

  it('expires queued items promptly while busy, with one timer at the earliest deadline', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: 8 })
    expect(h.clock.timers.map((t) => t.due)).toEqual([8])
    h.engine.push({ value: 'c', deadline: 5 })
    expect(h.clock.timers.map((t) => t.due)).toEqual([5]) // re-armed earlier, still one timer
    h.engine.push({ value: 'd', deadline: Infinity })
    h.engine.push({ value: 'e', deadline: 9 })
    expect(h.clock.timers.map((t) => t.due)).toEqual([5])
    h.clock.advance(5)
    expect(h.expired).toEqual([['c', 'deadline']])
    expect(h.clock.timers.map((t) => t.due)).toEqual([8])
    h.clock.advance(3)
    expect(h.expired).toEqual([
      ['c', 'deadline'],
      ['b', 'deadline'],
    ])
    expect(h.clock.timers.map((t) => t.due)).toEqual([9])
    await h.complete()
    expect(h.items()).toEqual([['a'], ['d', 'e']])
    expect(h.clock.timers).toHaveLength(0)
  })

  it('leaves no timer armed once the last queued item expires', () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: 3 })
    h.clock.advance(3)
    expect(h.expired).toEqual([['b', 'deadline']])
    expect(h.engine.queued).toBe(0)
    expect(h.clock.timers).toHaveLength(0)
  })

  it('leaves no timer armed once the queue empties by dispatch or cancel', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: 50 })
    expect(h.clock.timers).toHaveLength(1)
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b']])
    expect(h.clock.timers).toHaveLength(0)
    h.engine.push({ value: 'c', deadline: 50 })
    expect(h.clock.timers).toHaveLength(1)
    h.engine.cancel((v) => v === 'c')
    expect(h.clock.timers).toHaveLength(0)
  })

  it('under timer policy, expires an item whose deadline comes before the delay', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    h.engine.push({ value: 'a', deadline: 2 })
    h.clock.flushDefers()
    expect(h.clock.timers.map((t) => t.due)).toEqual([2])
    h.clock.advance(2)
    expect(h.expired).toEqual([['a', 'deadline']])
    expect(h.runs).toHaveLength(0)
    expect(h.clock.timers).toHaveLength(0)
  })

  it('runs the live part of a group and expires the rest at the same decision', () => {
    const h = harness({ maxBatchSize: 2 })
    h.engine.push({ value: 'a', deadline: 0 })
    h.engine.push({ value: 'b', deadline: 1 })
    h.engine.push({ value: 'c', deadline: 1 })
    h.clock.flushDefers()
    expect(h.expired).toEqual([['a', 'deadline']])
    expect(h.runs[0]?.batch).toMatchObject({ items: ['b', 'c'], reason: 'full' })
  })

  it('handles deadlines beyond the 32-bit timer range by re-arming', () => {
    const far = 2 ** 31 + 1000
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: far })
    expect(h.clock.timers.map((t) => t.due)).toEqual([2 ** 31 - 1])
    h.clock.advance(2 ** 31 - 1)
    expect(h.expired).toEqual([])
    expect(h.clock.timers.map((t) => t.due)).toEqual([far])
    h.clock.advanceTo(far)
    expect(h.expired).toEqual([['b', 'deadline']])
  })

  it('never arms more than one timer', () => {
    const h = harness({ policy: 'timer', maxDelayMs: 5 })
    h.engine.push({ value: 'a', deadline: 7, group: 'x' })
    h.clock.advance(1)
    h.engine.push({ value: 'b', deadline: 3, group: 'y' })
    h.clock.flushDefers()
    expect(h.clock.timers.map((t) => t.due)).toEqual([3])
    h.clock.advance(2)
    expect(h.expired).toEqual([['b', 'deadline']])
    expect(h.clock.timers.map((t) => t.due)).toEqual([5])
    h.clock.advance(2)
    expect(h.items()).toEqual([['a']])
    expect(h.clock.timers).toHaveLength(0)
  })
})
