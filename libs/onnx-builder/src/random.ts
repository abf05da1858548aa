/**
 * Small deterministic random number generators for reproducible model weights.
 * @module
 */

/**
 * mulberry32: a seeded 32-bit PRNG. Returns a function giving floats uniform in [0, 1);
 * the same seed always yields the same sequence.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * A standard normal sampler (Box-Muller) on top of a uniform source such as {@link mulberry32}.
 * Both values of each Box-Muller pair are used, so it is deterministic for a given source.
 * @param rand uniform source in [0, 1)
 * @returns a function giving samples of N(mean, std^2)
 */
export function normalSampler(rand: () => number, mean = 0, std = 1): () => number {
  let spare: number | undefined
  return () => {
    if (spare !== undefined) {
      const s = spare
      spare = undefined
      return mean + std * s
    }
    const u1 = 1 - rand() // (0, 1]: log never sees 0
    const u2 = rand()
    const r = Math.sqrt(-2 * Math.log(u1))
    const theta = 2 * Math.PI * u2
    spare = r * Math.sin(theta)
    return mean + std * r * Math.cos(theta)
  }
}

/** Fills a new `Float32Array` of length `n` with N(0, std^2) samples drawn from `normal`. */
export function fillNormal(n: number, normal: () => number, std = 1): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = normal() * std
  return out
}
