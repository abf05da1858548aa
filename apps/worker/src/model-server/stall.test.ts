import { describe, expect, it } from 'vitest'
import { encodeHeartbeat, decodeHeartbeat } from '@cohort/protocol'
import { StallWatch } from './stall.ts'

describe('StallWatch', () => {
  it('is stalled only while a batch runs past its deadline and its expected time', () => {
    let now = 1_000
    const w = new StallWatch(() => now)
    const end = w.begin(2_000, 500)
    now = 2_000
    expect(w.stalled).toBe(false) // at the deadline, not past it
    now = 2_001
    expect(w.stalledMs()).toBe(1)
    end()
    end() // idempotent
    expect(w.stalled).toBe(false)
  })

  it('waits for the expected run time of a batch that started close to its deadline', () => {
    let now = 0
    const w = new StallWatch(() => now)
    w.begin(100, 400) // expected to end at 400, after its deadline: slow, not hung
    now = 300
    expect(w.stalled).toBe(false)
    now = 401
    expect(w.stalled).toBe(true)
  })

  it('reports the oldest stall among running batches; ended batches do not count', () => {
    let now = 0
    const w = new StallWatch(() => now)
    const a = w.begin(10)
    w.begin(50)
    now = 60
    expect(w.stalledMs()).toBe(50)
    a()
    expect(w.stalledMs()).toBe(10)
  })
})

describe('heartbeat stalled field', () => {
  it('round-trips model names and drops what is not a string', () => {
    expect(decodeHeartbeat(encodeHeartbeat({ v: 1, id: 'w', intervalMs: 1000, stalled: ['a', 'b'] })).stalled).toEqual(['a', 'b'])
    const odd = decodeHeartbeat(encodeHeartbeat({ v: 1, id: 'w', intervalMs: 1000, stalled: [1, 'x'] as unknown as string[] }))
    expect(odd.stalled).toEqual(['x'])
    expect(decodeHeartbeat(encodeHeartbeat({ v: 1, id: 'w', intervalMs: 1000 })).stalled).toBeUndefined()
  })
})
