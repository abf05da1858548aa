/**
 * `xs[i]` where the caller keeps `i` in range (a loop bound, a checked length, a batch that is never
 * empty): out of range is a bug in Cohort, not bad input, and throws rather than going on with
 * `undefined`.
 */
export function elementAt<T>(xs: readonly T[], i: number): T {
  const v = xs[i]
  if (v === undefined) {
    throw new RangeError(`index ${i} is out of range (length ${xs.length})`)
  }
  return v
}
