import { afterEach, describe, expect, it } from 'vitest'
import { LoopLag } from './loop-lag.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const busy = (ms: number) => {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // block the event loop
  }
}

describe('LoopLag', () => {
  let lag: LoopLag | undefined
  afterEach(() => lag?.close())

  it('reads a blocked event loop as delay, both while blocked and after the next tick', async () => {
    lag = new LoopLag({ intervalMs: 5 })
    await sleep(30)
    busy(120)
    expect(lag.current()).toBeGreaterThanOrEqual(80) // overdue right now
    await sleep(1) // the interval fires late
    expect(lag.current()).toBeGreaterThanOrEqual(80)
  })

  it('reads 0 once closed (idempotent close)', () => {
    lag = new LoopLag()
    busy(20)
    lag.close()
    lag.close()
    expect(lag.current()).toBe(0)
  })
})
