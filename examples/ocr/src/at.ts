/**
 * `xs[i]` where the caller keeps `i` in range (a loop bound, a size checked before): out of range
 * is a bug, and throws rather than going on with `undefined`.
 */
export function at<T>(xs: ArrayLike<T>, i: number): T {
  const v = xs[i]
  if (v === undefined) {
    throw new RangeError(`index ${i} is out of range (length ${xs.length})`)
  }
  return v
}
