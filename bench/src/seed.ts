/**
 * Stable per-label seeds (FNV-1a of the label): the same label gets the same arrival pattern in
 * every run, so runs and configurations compare on one workload.
 * @module
 */

/** The 32-bit FNV-1a hash of `label`, as a PRNG seed. */
export function seedOf(label: string): number {
  let h = 2166136261
  for (const ch of label) {
    h = Math.imul(h ^ ch.charCodeAt(0), 16777619)
  }
  return h >>> 0
}
