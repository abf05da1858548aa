import { describe, expect, it } from 'vitest'
import { realClock } from './clock.ts'

describe('realClock', () => {
  it('reads epoch milliseconds', () => {
    const before = Date.now()
    const t = realClock.now()
    // performance.timeOrigin + now() tracks Date.now() to within a few ms, with sub-ms resolution.
    expect(t).toBeGreaterThanOrEqual(before - 5)
    expect(t).toBeLessThanOrEqual(Date.now() + 5)
  })

  it('defers past the current turn, after pending promise continuations', async () => {
    const log: string[] = []
    await new Promise<void>((resolve) => {
      realClock.defer(() => {
        log.push('defer')
        resolve()
      })
      void Promise.resolve().then(() => log.push('micro'))
      log.push('sync')
    })
    expect(log).toEqual(['sync', 'micro', 'defer'])
  })

  it('sets and clears timers', async () => {
    let fired = 0
    const h = realClock.setTimeout(() => fired++, 1)
    realClock.clearTimeout(h)
    await new Promise<void>((resolve) => realClock.setTimeout(resolve, 5))
    expect(fired).toBe(0)
  })
})
