import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { f16BitsToF32, f32ToF16Bits } from './fp16.ts'

/** Every finite non-negative FP16 value, ascending (bits 0x0000..0x7bff are monotonic). */
const FINITE = Array.from({ length: 0x7c00 }, (_, h) => f16BitsToF32(h))

/** Oracle: nearest FP16 by search, ties to the even bit pattern. */
function reference(x: number): number {
  if (Number.isNaN(x)) return 0x7e00
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0
  const a = Math.abs(x)
  if (a >= 65520) return sign | 0x7c00
  let lo = 0
  let hi = FINITE.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (FINITE[mid]! <= a) lo = mid
    else hi = mid - 1
  }
  if (lo === FINITE.length - 1) return sign | lo
  const dLo = a - FINITE[lo]!
  const dHi = FINITE[lo + 1]! - a
  return sign | (dLo < dHi || (dLo === dHi && lo % 2 === 0) ? lo : lo + 1)
}

describe('fp16', () => {
  it('converts known values', () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [0.1, 0x2e66],
      [65504, 0x7bff],
      [65519.99, 0x7bff],
      [65520, 0x7c00],
      [1e6, 0x7c00],
      [-1e300, 0xfc00],
      [Infinity, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400], // smallest normal
      [1023 * 2 ** -24, 0x03ff], // largest subnormal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie -> even (0)
      [2 ** -25 * 1.0000001, 0x0001],
      [3 * 2 ** -25, 0x0002], // tie 1.5 -> even (2)
      [-(2 ** -26), 0x8000], // underflow keeps the sign
      [1e-300, 0x0000],
      [1 + 2 ** -11, 0x3c00], // tie -> even
      [1 + 3 * 2 ** -11, 0x3c02], // tie -> even
      [1 + 2 ** -11 + 2 ** -40, 0x3c01], // just above a tie; float32 rounding first would give 0x3c00
      [2047.9999, 0x6800], // mantissa carry into the exponent
    ]
    for (const [x, h] of cases) {
      expect(f32ToF16Bits(x).toString(16), `f32ToF16Bits(${x})`).toBe(h.toString(16))
    }
  })

  it('maps NaN to a quiet NaN and back', () => {
    expect(f32ToF16Bits(NaN)).toBe(0x7e00)
    expect(Number.isNaN(f16BitsToF32(0x7e00))).toBe(true)
    expect(Number.isNaN(f16BitsToF32(0xfc01))).toBe(true)
    expect(f16BitsToF32(0x7c00)).toBe(Infinity)
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity)
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true)
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24)
    expect(f16BitsToF32(0x3555)).toBeCloseTo(1 / 3, 3)
  })

  it('round-trips every non-NaN bit pattern', () => {
    for (let h = 0; h < 0x10000; h++) {
      const x = f16BitsToF32(h)
      if (Number.isNaN(x)) {
        expect((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0).toBe(true)
        expect(f32ToF16Bits(x)).toBe(0x7e00)
      } else if (f32ToF16Bits(x) !== h) {
        throw new Error(`bits ${h.toString(16)} -> ${x} -> ${f32ToF16Bits(x).toString(16)}`)
      }
    }
  })

  it('agrees with a nearest-value search for any double', () => {
    fc.assert(
      fc.property(fc.oneof(fc.double(), fc.double({ min: -70000, max: 70000 }), fc.float({ min: -1, max: 1 })), (x) => {
        expect(f32ToF16Bits(x)).toBe(reference(x))
      }),
      { numRuns: 20_000 },
    )
  })
})
