import { describe, expect, it } from 'vitest'
import { GroupedQueue, oldestEnqueuedAt, runsBefore } from './queue.ts'

describe('GroupedQueue', () => {
  it('keeps each group in (priority desc, arrival) order', () => {
    const q = new GroupedQueue<string>()
    q.add('a', Infinity, 'g', 0, 0)
    q.add('b', Infinity, 'g', 1, 1)
    q.add('c', Infinity, 'g', 0, 2)
    q.add('d', Infinity, 'g', 1, 3)
    q.add('e', Infinity, 'g', 5, 4)
    expect(q.size).toBe(5)
    expect(q.take('g', 10).map((i) => i.value)).toEqual(['e', 'b', 'd', 'a', 'c'])
    expect(q.size).toBe(0)
    expect([...q.groups()]).toEqual([])
  })

  it('picks the group of the best head, optionally among accepted groups', () => {
    const q = new GroupedQueue<string>()
    q.add('x', Infinity, 'x', 0, 0)
    q.add('y', Infinity, 'y', 0, 1)
    q.add('z', Infinity, 'z', 1, 2)
    expect(q.pick()).toBe('z')
    expect(q.pick((items) => items[0]?.group !== 'z')).toBe('x')
    expect(q.pick(() => false)).toBeUndefined()
    expect(new GroupedQueue().pick()).toBeUndefined()
  })

  it('takes at most n items and drops emptied groups', () => {
    const q = new GroupedQueue<number>()
    for (let i = 0; i < 5; i++) {
      q.add(i, Infinity, 'g', 0, i)
    }
    expect(q.take('g', 2).map((i) => i.value)).toEqual([0, 1])
    expect(q.size).toBe(3)
    expect(q.take('none', 2)).toEqual([])
    expect(q.take('g', 5).map((i) => i.value)).toEqual([2, 3, 4])
    expect(q.pick()).toBeUndefined()
  })

  it('removes matches across groups, returned in arrival order', () => {
    const q = new GroupedQueue<string>()
    q.add('a', 5, 'x', 0, 0)
    q.add('b', 9, 'y', 0, 1)
    q.add('c', 3, 'x', 2, 2)
    q.add('d', Infinity, 'y', 0, 3)
    expect(q.earliestDeadline()).toBe(3)
    expect(q.removeWhere((i) => i.deadline <= 5).map((i) => i.value)).toEqual(['a', 'c'])
    expect(q.size).toBe(2)
    expect(q.earliestDeadline()).toBe(9)
    expect([...q.groups()].map((l) => l.map((i) => i.value))).toEqual([['b', 'd']])
    q.removeWhere(() => true)
    expect(q.earliestDeadline()).toBe(Infinity)
  })

  it('orders items and finds the oldest', () => {
    const q = new GroupedQueue<string>()
    const a = q.add('a', Infinity, '', 0, 10)
    const b = q.add('b', Infinity, '', 1, 20)
    expect(runsBefore(b, a)).toBe(true)
    expect(runsBefore(a, b)).toBe(false)
    expect(oldestEnqueuedAt([b, a])).toBe(10)
    expect(oldestEnqueuedAt([])).toBe(Infinity)
  })
})
