import { describe, expect, it } from 'vitest'
import { TimeLimits } from './types.ts'

describe('TimeLimits', () => {
  it('rejects with the run’s own reason when the run fails within its limit (no timeout)', async () => {
    const limits = new TimeLimits()
    const reason = new Error('the run failed')
    let timedOut = false
    await expect(limits.run(Promise.reject(reason), 60_000, 'a batch', () => (timedOut = true))).rejects.toBe(reason)
    expect(timedOut).toBe(false)
  })

  it('resolves with the run’s value when it ends within its limit (no timeout)', async () => {
    const limits = new TimeLimits()
    let timedOut = false
    await expect(limits.run(Promise.resolve(42), 60_000, 'a batch', () => (timedOut = true))).resolves.toBe(42)
    expect(timedOut).toBe(false)
  })
})
