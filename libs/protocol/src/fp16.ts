/**
 * IEEE 754 binary16 (FP16) <-> number conversion on raw 16-bit patterns.
 * @module
 */

const view = new DataView(new ArrayBuffer(8))

/** 2^(e-25) for a biased FP16 exponent e in 1..30 (value = (1024 + mantissa) * POW[e]). */
const POW = Array.from({ length: 31 }, (_, e) => 2 ** (e - 25))
const SUBNORMAL_UNIT = 2 ** -24

/**
 * The FP16 bit pattern nearest to `x` (round to nearest, ties to even), computed from the full
 * double so there is no double rounding. NaN -> 0x7e00 (the canonical quiet NaN), values at or
 * beyond 65520 -> ±Infinity, tiny values -> subnormals or ±0.
 */
export function f32ToF16Bits(x: number): number {
  view.setFloat64(0, x)
  const hi = view.getUint32(0)
  const lo = view.getUint32(4)
  const sign = (hi >>> 16) & 0x8000
  const exp = (hi >>> 20) & 0x7ff
  if (exp === 0x7ff) {
    return (hi & 0xfffff) !== 0 || lo !== 0 ? 0x7e00 : sign | 0x7c00
  }
  const e = exp - 1023
  if (e > 15) {
    return sign | 0x7c00
  }
  if (e >= -14) {
    const mh = hi & 0xfffff
    const m10 = mh >>> 10
    const rest = mh & 0x3ff
    const up = rest > 0x200 || (rest === 0x200 && (lo !== 0 || (m10 & 1) === 1)) ? 1 : 0
    // A mantissa carry rolls into the exponent; from e = 15 it yields 0x7c00 (Infinity).
    return (sign | ((e + 15) << 10)) + m10 + up
  }
  // Subnormal or zero: units of 2^-24. Scaling by a power of two is exact, so is v - floor(v).
  const v = Math.abs(x) * 16777216
  const f = Math.floor(v)
  const d = v - f
  return sign | (d > 0.5 || (d === 0.5 && (f & 1) === 1) ? f + 1 : f)
}

/** The number an FP16 bit pattern stands for (exact; ±0, subnormals, ±Infinity and NaN included). */
export function f16BitsToF32(h: number): number {
  const exp = (h >>> 10) & 0x1f
  const m = h & 0x3ff
  const v = exp === 0 ? m * SUBNORMAL_UNIT : exp === 31 ? (m === 0 ? Infinity : NaN) : (1024 + m) * (POW[exp] ?? 2 ** (exp - 25))
  return h & 0x8000 ? -v : v
}
