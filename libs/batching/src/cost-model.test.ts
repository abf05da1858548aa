import { describe, expect, it } from 'vitest'
import { CostModel } from './cost-model.ts'

/** Deterministic uniform [0, 1) numbers (a small LCG), so the tests never flake. */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

describe('CostModel', () => {
  it('starts empty: no samples, zero estimates', () => {
    const m = new CostModel()
    expect(m.samples).toBe(0)
    expect(m.estimate(8)).toBe(0)
    expect(m.upper(8)).toBe(0)
    expect(m.toJSON()).toEqual({ a: 0, c: 0, samples: 0, ratio: 1 })
  })

  it('converges to a synthetic t(b) = 2 + 0.5·b with ±5 % noise within 5 %', () => {
    const m = new CostModel()
    const rand = rng(42)
    for (let i = 0; i < 300; i++) {
      const b = 1 + Math.floor(rand() * 32)
      const noise = 1 + (rand() * 2 - 1) * 0.05
      m.observe(b, (2 + 0.5 * b) * noise)
    }
    expect(m.samples).toBe(300)
    expect(Math.abs(m.a - 2) / 2).toBeLessThan(0.05)
    expect(Math.abs(m.c - 0.5) / 0.5).toBeLessThan(0.05)
    for (const b of [1, 8, 32]) {
      expect(Math.abs(m.estimate(b) - (2 + 0.5 * b)) / (2 + 0.5 * b)).toBeLessThan(0.05)
      // The upper bound covers the noise (~5 %) without being wildly pessimistic.
      expect(m.upper(b)).toBeGreaterThanOrEqual(m.estimate(b))
      expect(m.upper(b) / m.estimate(b)).toBeLessThan(1.12)
    }
    expect(m.ratio).toBeGreaterThan(1.01)
  })

  it('is exact on noise-free data, and its upper bound then equals the estimate', () => {
    const m = new CostModel()
    for (const b of [1, 4, 2, 8, 3, 16]) m.observe(b, 4.7 + 1.28 * b)
    expect(m.a).toBeCloseTo(4.7, 9)
    expect(m.c).toBeCloseTo(1.28, 9)
    expect(m.upper(10)).toBeCloseTo(m.estimate(10), 9)
  })

  it('tracks a change of speed (exponential forgetting)', () => {
    const m = new CostModel()
    for (let i = 0; i < 100; i++) m.observe(1 + (i % 8), 2 + 0.5 * (1 + (i % 8)))
    for (let i = 0; i < 300; i++) m.observe(1 + (i % 8), 1 + 0.25 * (1 + (i % 8)))
    expect(m.a).toBeCloseTo(1, 2)
    expect(m.c).toBeCloseTo(0.25, 2)
  })

  it('with one size only, falls back to the proportional model c = t/b, a = 0', () => {
    const m = new CostModel()
    m.observe(4, 10)
    expect(m.a).toBe(0)
    expect(m.c).toBe(2.5)
    m.observe(4, 12)
    expect(m.a).toBe(0)
    expect(m.c).toBeGreaterThan(2.5)
    expect(m.c).toBeLessThan(3)
    expect(m.estimate(2)).toBeCloseTo(m.c * 2, 12)
  })

  it('keeps the last well-conditioned intercept while only one size is seen', () => {
    const m = new CostModel()
    for (const b of [1, 8, 16, 32]) m.observe(b, 2 + 0.5 * b)
    expect(m.a).toBeCloseTo(2, 9)
    for (let i = 0; i < 500; i++) m.observe(32, 2 + 0.5 * 32) // full batches only, for a long time
    expect(m.a).toBeCloseTo(2, 6)
    expect(m.c).toBeCloseTo(0.5, 6)
  })

  it('clamps: a negative slope becomes c = 0, a negative intercept a = 0', () => {
    const down = new CostModel({ decay: 1 }) // equal weights, for round numbers
    for (const [b, t] of [
      [1, 10],
      [10, 5],
      [1, 10],
      [10, 5],
    ] as const)
      down.observe(b, t)
    expect(down.c).toBe(0)
    expect(down.a).toBeCloseTo(7.5, 9)
    const steep = new CostModel({ decay: 1 })
    for (const [b, t] of [
      [2, 1],
      [10, 9],
      [2, 1],
      [10, 9],
    ] as const)
      steep.observe(b, t) // t = b - 1
    expect(steep.a).toBe(0)
    expect(steep.c).toBeGreaterThan(0)
    expect(steep.c).toBeCloseTo((2 * 1 + 10 * 9) / (4 + 100), 9) // least squares through the origin
  })

  it('bases upper() on a quantile of recent measured/estimated ratios', () => {
    const m = new CostModel({ window: 10, quantile: 0.9 })
    for (let i = 0; i < 10; i++) m.observe(1 + (i % 5), 1 + (1 + (i % 5)))
    expect(m.ratio).toBeCloseTo(1, 9)
    m.observe(3, 8) // one slow batch (2x): an outlier above the 0.9 quantile of 10 is ignored...
    const ratioOne = m.ratio
    m.observe(3, 8) // ...but two are not
    expect(m.ratio).toBeGreaterThan(ratioOne)
    expect(m.ratio).toBeGreaterThan(1.3)
    for (let i = 0; i < 10; i++) m.observe(1 + (i % 5), m.estimate(1 + (i % 5)))
    expect(m.ratio).toBeLessThan(1.05) // out of the window again
  })

  it('ignores observations that are not finite, or not positive sizes', () => {
    const m = new CostModel()
    for (const [b, t] of [
      [0, 1],
      [-1, 1],
      [Number.NaN, 1],
      [1, Number.NaN],
      [1, -1],
      [Infinity, 1],
      [1, Infinity],
    ]) {
      m.observe(b as number, t as number)
    }
    expect(m.samples).toBe(0)
    m.observe(2, 0)
    expect(m.samples).toBe(1)
    expect(m.estimate(5)).toBe(0)
  })

  it('validates its options', () => {
    expect(() => new CostModel({ decay: 0 })).toThrow(RangeError)
    expect(() => new CostModel({ decay: 1.1 })).toThrow(RangeError)
    expect(() => new CostModel({ window: 0 })).toThrow(RangeError)
    expect(() => new CostModel({ window: 2.5 })).toThrow(RangeError)
    expect(() => new CostModel({ quantile: 0 })).toThrow(RangeError)
    expect(() => new CostModel({ quantile: Number.NaN })).toThrow(RangeError)
    expect(() => new CostModel({ decay: 1, window: 1, quantile: 1 })).not.toThrow()
  })
})
