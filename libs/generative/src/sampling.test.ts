import { describe, expect, it } from 'vitest'
import { seededPrng } from './prng.ts'
import { argmax, sampleToken, topIndices } from './sampling.ts'

const row = Float32Array.from([0, 3, 1, 2.5, -1])
const S = (o: Partial<{ temperature: number; topK: number; topP: number; logprobs: number }>) => ({ temperature: 1, topK: 0, topP: 1, logprobs: undefined, ...o })

describe('sampling', () => {
  it('greedy takes the argmax; topIndices orders best first', () => {
    expect(sampleToken(row, S({ temperature: 0 }), seededPrng(1)).token).toBe(1)
    expect(topIndices(row, 3)).toEqual([1, 3, 2])
  })

  it('argmax of a row inside a batch of logits: the index within that row, the first one on ties', () => {
    const batch = Float32Array.from([9, 9, 9, /* row 1: */ 0, 4, 4, /* row 2: */ -2, -1, -3])
    expect(argmax(batch, 3, 3)).toBe(1)
    expect(argmax(batch, 6, 3)).toBe(1)
    expect(argmax(batch, 0, 3)).toBe(0)
  })

  it('top-k 2 only ever returns the two best; top-p 0.5 only the best here', () => {
    const rng = seededPrng(3)
    const seen = new Set<number>()
    for (let i = 0; i < 300; i++) seen.add(sampleToken(row, S({ topK: 2 }), rng).token)
    expect([...seen].sort()).toEqual([1, 3])
    for (let i = 0; i < 100; i++) expect(sampleToken(row, S({ topP: 0.5 }), rng).token).toBe(1)
  })

  it('the same seed gives the same draws; frequencies follow softmax', () => {
    const a = seededPrng(42)
    const b = seededPrng(42)
    const xs = Array.from({ length: 50 }, () => sampleToken(row, S({}), a).token)
    expect(Array.from({ length: 50 }, () => sampleToken(row, S({}), b).token)).toEqual(xs)
    const rng = seededPrng(7)
    const n = 20_000
    let ones = 0
    for (let i = 0; i < n; i++) if (sampleToken(row, S({}), rng).token === 1) ones++
    const p1 = Math.exp(3) / [0, 3, 1, 2.5, -1].reduce((s, x) => s + Math.exp(x), 0)
    expect(Math.abs(ones / n - p1)).toBeLessThan(0.02)
  })

  it('logprobs: the token and its alternatives, log-softmax of the raw logits', () => {
    const lse = Math.log([0, 3, 1, 2.5, -1].reduce((s, x) => s + Math.exp(x), 0))
    const r = sampleToken(row, S({ temperature: 0, logprobs: 2 }), seededPrng(1))
    expect(r.logprob?.token).toBe(1)
    expect(r.logprob?.logprob).toBeCloseTo(3 - lse, 5)
    expect(r.logprob?.top?.map((t) => t.token)).toEqual([1, 3])
  })
})
