import { afterEach, describe, expect, it, vi } from 'vitest'
import { BatchEngine } from './engine.ts'
import { FakeClock } from './fake-clock.ts'
import { harness, pushAll } from './test-harness.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('BatchEngine.cancel', () => {
  it('removes matching queued items, expires each as cancelled, in arrival order', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b', 'c', 'd')
    expect(h.engine.cancel((v) => v !== 'c')).toBe(2) // 'a' is running: untouched
    expect(h.expired).toEqual([
      ['b', 'cancelled'],
      ['d', 'cancelled'],
    ])
    expect(h.engine.queued).toBe(1)
    expect(h.engine.stats.expired.cancelled).toBe(2)
    await h.complete()
    expect(h.items()).toEqual([['a'], ['c']])
  })

  it('returns 0 and changes nothing when nothing matches', () => {
    const h = harness()
    pushAll(h, 'a')
    expect(h.engine.cancel(() => false)).toBe(0)
    expect(h.engine.queued).toBe(1)
  })

  it('removes nothing when the predicate throws', () => {
    const h = harness()
    pushAll(h, 'a', 'b')
    expect(() =>
      h.engine.cancel((v) => {
        if (v === 'b') {
          throw new Error('boom')
        }
        return true
      }),
    ).toThrow('boom')
    expect(h.engine.queued).toBe(2)
    expect(h.expired).toEqual([])
  })
})

describe('BatchEngine.idle', () => {
  it('resolves at once when nothing is queued or running', async () => {
    const h = harness()
    await expect(h.engine.idle()).resolves.toBeUndefined()
  })

  it('waits for the queue to drain and the last run to settle', async () => {
    const h = harness({ maxBatchSize: 1 })
    let idle = false
    pushAll(h, 'a', 'b')
    void h.engine.idle().then(() => {
      idle = true
    })
    await h.clock.settle()
    await h.complete()
    expect(idle).toBe(false)
    await h.complete()
    expect(idle).toBe(true)
  })

  it('resolves when the queue empties through expiry', async () => {
    const h = harness({ policy: 'timer', maxDelayMs: 10 })
    h.engine.push({ value: 'a', deadline: 3 })
    const idle = h.engine.idle()
    h.clock.advance(3)
    await expect(idle).resolves.toBeUndefined()
  })
})

describe('BatchEngine.close', () => {
  it('expires everything queued as closed, clears the timer and refuses pushes', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    h.engine.push({ value: 'b', deadline: 10 })
    pushAll(h, 'c')
    expect(h.clock.timers).toHaveLength(1)
    h.engine.close()
    expect(h.engine.closed).toBe(true)
    expect(h.expired).toEqual([
      ['b', 'closed'],
      ['c', 'closed'],
    ])
    expect(h.clock.timers).toHaveLength(0)
    expect(h.engine.push({ value: 'd', deadline: Infinity })).toBe(false)
    expect(h.engine.queued).toBe(0)
    h.engine.close()
    expect(h.expired).toHaveLength(2)
    expect(h.engine.stats.expired.closed).toBe(2)
    // The running batch finishes normally; idle() waits for it.
    let idle = false
    void h.engine.idle().then(() => {
      idle = true
    })
    await h.clock.settle()
    expect(idle).toBe(false)
    await h.complete()
    expect(idle).toBe(true)
    expect(h.runs).toHaveLength(1)
  })

  it('cancels a dispatch that was deferred before close', () => {
    const h = harness()
    pushAll(h, 'a')
    h.engine.close()
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(0)
    expect(h.expired).toEqual([['a', 'closed']])
  })

  it('is safe to call from inside run', () => {
    const clock = new FakeClock()
    const expired: string[] = []
    const engine: BatchEngine<string> = new BatchEngine<string>({
      clock,
      maxBatchSize: 1,
      concurrency: 2,
      run: (): Promise<void> => {
        engine.close()
        return Promise.resolve()
      },
      expire: (v) => expired.push(v),
    })
    for (const value of ['a', 'b', 'c']) {
      engine.push({ value, deadline: Infinity })
    }
    clock.flushDefers()
    expect(engine.stats.batches).toBe(1)
    expect(expired).toEqual(['b', 'c'])
  })
})

describe('BatchEngine.push limits', () => {
  it('returns false and queues nothing when queued >= maxQueue', async () => {
    const h = harness({ maxQueue: 2 })
    pushAll(h, 'a')
    h.clock.flushDefers() // 'a' runs: not counted as queued
    expect(h.engine.push({ value: 'b', deadline: Infinity })).toBe(true)
    expect(h.engine.push({ value: 'c', deadline: Infinity })).toBe(true)
    expect(h.engine.push({ value: 'd', deadline: Infinity })).toBe(false)
    expect(h.engine.queued).toBe(2)
    expect(h.expired).toEqual([])
    await h.complete()
    expect(h.engine.push({ value: 'e', deadline: Infinity })).toBe(true)
  })

  it('rejects NaN deadline or priority', () => {
    const h = harness()
    expect(() => h.engine.push({ value: 'a', deadline: Number.NaN })).toThrow(RangeError)
    expect(() => h.engine.push({ value: 'a', deadline: 1, priority: Number.NaN })).toThrow(RangeError)
    expect(h.engine.queued).toBe(0)
  })
})

describe('BatchEngine run errors', () => {
  it('passes a rejection to onRunError and frees the slot', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b')
    const err = new Error('gpu on fire')
    await h.fail(err)
    expect(h.runErrors).toEqual([[err, h.runs[0]?.batch]])
    expect(h.items()).toEqual([['a'], ['b']])
    expect(h.engine.running).toBe(1)
  })

  it('treats a synchronous throw from run like a rejection', async () => {
    const clock = new FakeClock()
    const errors: unknown[] = []
    const engine = new BatchEngine<string>({
      clock,
      run: () => {
        throw new Error('sync')
      },
      expire: () => {},
      onRunError: (err) => errors.push(err),
    })
    engine.push({ value: 'a', deadline: Infinity })
    clock.flushDefers()
    expect(engine.running).toBe(1)
    await clock.settle()
    expect(engine.running).toBe(0)
    expect(errors).toEqual([new Error('sync')])
  })

  it('reports errors nobody handles asynchronously, keeping its bookkeeping', async () => {
    const reported: (() => void)[] = []
    vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((fn) => reported.push(fn))
    const clock = new FakeClock()
    const engine = new BatchEngine<string>({
      clock,
      run: () => Promise.reject(new Error('no handler')),
      expire: () => {
        throw new Error('bad expire')
      },
    })
    engine.push({ value: 'a', deadline: Infinity })
    engine.push({ value: 'b', deadline: 0 })
    clock.flushDefers()
    expect(engine.stats.expired.deadline).toBe(1)
    await new Promise((r) => setTimeout(r, 0))
    expect(engine.running).toBe(0)
    vi.restoreAllMocks()
    expect(reported).toHaveLength(2)
    expect(reported[0]).toThrow('bad expire')
    expect(reported[1]).toThrow('no handler')
  })
})

describe('BatchEngine construction and stats', () => {
  it('validates concurrency and batching options', () => {
    const base = { run: async () => {}, expire: () => {} }
    expect(() => new BatchEngine({ ...base, concurrency: 0 })).toThrow(RangeError)
    expect(() => new BatchEngine({ ...base, concurrency: 1.5 })).toThrow(RangeError)
    expect(() => new BatchEngine({ ...base, maxBatchSize: 0 })).toThrow(RangeError)
    expect(() => new BatchEngine({ ...base, policy: 'fifo' as never })).toThrow(RangeError)
    expect(() => new BatchEngine({ ...base, maxBatchCost: 0 })).toThrow(RangeError)
    expect(() => new BatchEngine({ expire: () => {} } as never)).toThrow(TypeError)
    const e = new BatchEngine(base)
    expect(e.config).toEqual({
      maxBatchSize: 32,
      maxDelayMs: 5,
      policy: 'eager',
      maxQueue: 4096,
      maxBatchCost: Infinity,
      admission: true,
      autoBatchSize: false,
      sloMs: 0,
      maxTenantQueue: 0,
    })
    expect(e.concurrency).toBe(1)
    e.close()
  })

  it('counts batches, items and reasons', async () => {
    const h = harness({ maxBatchSize: 2 })
    pushAll(h, 'a', 'b', 'c')
    h.engine.push({ value: 'x', deadline: 0 })
    h.clock.flushDefers()
    await h.complete()
    expect(h.engine.stats).toEqual({
      dispatched: { idle: 1, full: 1, timer: 0, deadline: 0 },
      batches: 2,
      items: 3,
      expired: { deadline: 1, cancelled: 0, closed: 0, doomed: 0 },
      refused: { full: 0, late: 0 },
    })
  })
})
