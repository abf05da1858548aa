import { describe, expect, it } from 'vitest'
import { FakeClock } from './fake-clock.ts'

describe('FakeClock', () => {
  it('starts at the given time and moves only on advance', () => {
    const c = new FakeClock(1000)
    expect(c.now()).toBe(1000)
    c.advance(5)
    expect(c.now()).toBe(1005)
    c.advanceTo(1003)
    expect(c.now()).toBe(1005)
    c.advanceTo(1010)
    expect(c.now()).toBe(1010)
    expect(() => c.advance(-1)).toThrow(RangeError)
  })

  it('fires due timers in (due, creation) order with now() at each due time', () => {
    const c = new FakeClock()
    const log: string[] = []
    c.setTimeout(() => log.push(`b@${c.now()}`), 5)
    c.setTimeout(() => log.push(`a@${c.now()}`), 3)
    c.setTimeout(() => log.push(`c@${c.now()}`), 5)
    c.setTimeout(() => log.push(`late@${c.now()}`), 11)
    expect(c.timers.map((t) => t.due)).toEqual([3, 5, 5, 11])
    expect(c.advance(10)).toBe(3)
    expect(log).toEqual(['a@3', 'b@5', 'c@5'])
    expect(c.now()).toBe(10)
    expect(c.timers.map((t) => t.due)).toEqual([11])
  })

  it('fires timers scheduled by timers when they fall in range', () => {
    const c = new FakeClock()
    const log: number[] = []
    c.setTimeout(() => {
      log.push(c.now())
      c.setTimeout(() => log.push(c.now()), 2)
      c.setTimeout(() => log.push(c.now()), 20)
    }, 1)
    c.advance(5)
    expect(log).toEqual([1, 3])
    expect(c.timers).toHaveLength(1)
  })

  it('clears timers; unknown handles are ignored', () => {
    const c = new FakeClock()
    let fired = false
    const t = c.setTimeout(() => {
      fired = true
    }, 1)
    c.clearTimeout(t)
    c.clearTimeout({})
    c.clearTimeout(undefined)
    c.advance(5)
    expect(fired).toBe(false)
    expect(c.timers).toHaveLength(0)
  })

  it('treats a negative delay as 0', () => {
    const c = new FakeClock(10)
    c.setTimeout(() => {}, -5)
    expect(c.timers.map((t) => t.due)).toEqual([10])
  })

  it('runs defers FIFO, including ones queued while flushing', () => {
    const c = new FakeClock()
    const log: string[] = []
    c.defer(() => {
      log.push('a')
      c.defer(() => log.push('c'))
    })
    c.defer(() => log.push('b'))
    expect(c.pendingDefers).toBe(2)
    expect(log).toEqual([])
    expect(c.flushDefers()).toBe(3)
    expect(log).toEqual(['a', 'b', 'c'])
    expect(c.pendingDefers).toBe(0)
  })

  it('advance runs defers before each timer, as an event loop would', () => {
    const c = new FakeClock()
    const log: string[] = []
    c.defer(() => log.push(`d0@${c.now()}`))
    c.setTimeout(() => {
      log.push(`t1@${c.now()}`)
      c.defer(() => log.push(`d1@${c.now()}`))
    }, 1)
    c.setTimeout(() => log.push(`t2@${c.now()}`), 2)
    c.advance(5)
    expect(log).toEqual(['d0@0', 't1@1', 'd1@1', 't2@2'])
  })

  it('settle() lets promise continuations, defers and zero-delay timers run', async () => {
    const c = new FakeClock()
    const log: string[] = []
    void Promise.resolve().then(() => {
      log.push('micro')
      c.defer(() => {
        log.push('defer')
        c.setTimeout(() => {
          log.push('timer0')
          void Promise.resolve().then(() => c.defer(() => log.push('again')))
        }, 0)
      })
    })
    await c.settle()
    expect(log).toEqual(['micro', 'defer', 'timer0', 'again'])
    expect(c.now()).toBe(0)
  })
})

describe('FakeClock runaway guards', () => {
  it('throws instead of hanging on a timer that re-arms itself at the same instant', () => {
    const c = new FakeClock()
    const loop = (): void => {
      c.setTimeout(loop, 0)
    }
    loop()
    expect(() => c.advance(1)).toThrow(/runaway/)
  })

  it('throws instead of hanging on a callback that keeps deferring itself', () => {
    const c = new FakeClock()
    const loop = (): void => c.defer(loop)
    loop()
    expect(() => c.flushDefers()).toThrow(/runaway/)
  })
})
