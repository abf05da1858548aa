import { describe, expect, it } from 'vitest'
import { harness, pushAll } from './test-harness.ts'

describe('BatchEngine.runNow', () => {
  it('runs entries as one batch in this turn on an idle eager engine: no queue entry, no defer', () => {
    const h = harness()
    expect(
      h.engine.runNow([
        { value: 'a', deadline: Infinity },
        { value: 'b', deadline: Infinity },
      ]),
    ).toBe(true)
    expect(h.clock.pendingDefers).toBe(0)
    expect(h.engine.queued).toBe(0)
    expect(h.engine.running).toBe(1)
    expect(h.items()).toEqual([['a', 'b']])
    expect(h.runs[0]?.batch.reason).toBe('idle')
    expect(h.engine.stats.batches).toBe(1)
  })

  it('refuses (and does nothing) when busy, when something is queued, or when the entries do not fit one batch', () => {
    const h = harness({ maxBatchSize: 2 })
    expect(h.engine.runNow([1, 2, 3].map((n) => ({ value: String(n), deadline: Infinity })))).toBe(false)
    expect(
      h.engine.runNow([
        { value: 'x', deadline: Infinity, group: 'g' },
        { value: 'y', deadline: Infinity },
      ]),
    ).toBe(false)
    expect(h.engine.runNow([{ value: 'late', deadline: -1 }])).toBe(false)
    expect(h.runs).toHaveLength(0)
    pushAll(h, 'q')
    expect(h.engine.runNow([{ value: 'a', deadline: Infinity }])).toBe(false) // 'q' queued first
    h.clock.flushDefers()
    expect(h.engine.running).toBe(1)
    expect(h.engine.runNow([{ value: 'a', deadline: Infinity }])).toBe(false) // the one slot is busy
    expect(h.items()).toEqual([['q']])
  })

  it('is off under the timer policy (a timer batch waits for company) and after close', () => {
    const t = harness({ policy: 'timer', maxDelayMs: 5 })
    expect(t.engine.runNow([{ value: 'a', deadline: Infinity }])).toBe(false)
    const c = harness()
    c.engine.close()
    expect(c.engine.runNow([{ value: 'a', deadline: Infinity }])).toBe(false)
  })

  it('holds its slot until the batch settles; queued items then dispatch as usual', async () => {
    const h = harness()
    expect(h.engine.runNow([{ value: 'a', deadline: Infinity }])).toBe(true)
    pushAll(h, 'b', 'c')
    h.clock.flushDefers()
    expect(h.runs).toHaveLength(1)
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b', 'c']])
  })
})
