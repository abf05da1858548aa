/**
 * The sampler's seeded PRNG: mulberry32, one stream per generation, so a seed reproduces the
 * same tokens wherever the generation runs (alone, batched, after a preemption).
 * @module
 */

/** A uniform source in [0, 1) with its state readable (for tests). */
export interface Prng {
  next(): number
}

/** mulberry32 over a 32-bit seed (non-integers and negatives are folded with `>>> 0`). */
export function seededPrng(seed: number): Prng {
  let a = Math.floor(seed) >>> 0
  return {
    next(): number {
      a = (a + 0x6d2b79f5) >>> 0
      let t = a
      t = Math.imul(t ^ (t >>> 15), t | 1)
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    },
  }
}
