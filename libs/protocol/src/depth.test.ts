import { describe, expect, it } from 'vitest'
import { MAX_VALUE_DEPTH, deeperThan } from './depth.ts'

const nest = (d: number): unknown => JSON.parse('['.repeat(d) + ']'.repeat(d))

describe('deeperThan', () => {
  it('counts container levels: scalars 0, [[1]] 2', () => {
    expect(deeperThan(1, 0)).toBe(false)
    expect(deeperThan([[1]], 2)).toBe(false)
    expect(deeperThan([[1]], 1)).toBe(true)
    expect(deeperThan({ a: { b: [] } }, 3)).toBe(false)
    expect(deeperThan({ a: { b: [] } }, 2)).toBe(true)
    expect(deeperThan(new Float32Array(4), 0)).toBe(false)
  })

  it('takes MAX_VALUE_DEPTH levels and refuses one more', () => {
    expect(deeperThan(nest(MAX_VALUE_DEPTH))).toBe(false)
    expect(deeperThan(nest(MAX_VALUE_DEPTH + 1))).toBe(true)
  })

  it('checks 100,000 levels without overflowing the stack', () => {
    expect(deeperThan(nest(100_000))).toBe(true)
  })
})
