import { describe, expect, it } from 'vitest'
import { softmax, topK } from './postprocess.ts'

describe('softmax', () => {
  it('sums to 1 and is stable for large logits', () => {
    const p = softmax([1000, 1001, 999, 1000])
    expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12)
    expect(p[1]).toBeGreaterThan(p[0] as number)
    expect(p.every(Number.isFinite)).toBe(true)
  })
})

describe('topK', () => {
  it('returns the k most probable labels, best first, with rounded scores', () => {
    const r = topK(new Float32Array([0, 3, 1, 2]), 2)
    expect(r.map((x) => x.label)).toEqual(['Sports', 'Sci/Tech'])
    const p = softmax([0, 3, 1, 2])
    expect(r[0]?.score).toBeCloseTo(p[1] as number, 6)
    expect(String(r[0]?.score).split('.')[1]?.length ?? 0).toBeLessThanOrEqual(6)
  })

  it('keeps label order on ties', () => {
    expect(topK([1, 1, 1, 1], 4).map((x) => x.label)).toEqual(['World', 'Sports', 'Business', 'Sci/Tech'])
  })

  it('rejects a bad k or the wrong number of logits', () => {
    expect(() => topK([0, 0, 0, 0], 0)).toThrow(RangeError)
    expect(() => topK([0, 0, 0, 0], 5)).toThrow(RangeError)
    expect(() => topK([0, 0, 0], 1)).toThrow(/expected 4 logits/)
  })
})
