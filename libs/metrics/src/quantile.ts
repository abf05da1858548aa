/**
 * Quantiles from Prometheus-style cumulative histogram buckets, as `histogram_quantile` computes
 * them: find the bucket that holds the rank and interpolate linearly inside it. Pure.
 * @module
 */

/** One cumulative bucket: `count` observations were <= `le` (the last bucket has `le: Infinity`). */
export interface CumulativeBucket {
  le: number
  count: number
}

/**
 * Observations between two scrapes of one histogram series: `cur - prev`, bucket by bucket.
 * Buckets match by `le`; a bucket missing from `prev` counts as 0. A counter reset (any bucket
 * went down, e.g. the process restarted) yields `cur` unchanged: everything since the reset.
 */
export function bucketDeltas(cur: readonly CumulativeBucket[], prev: readonly CumulativeBucket[] | undefined): CumulativeBucket[] {
  if (!prev || prev.length === 0) {
    return cur.map((b) => ({ le: b.le, count: b.count }))
  }
  const before = new Map(prev.map((b) => [b.le, b.count]))
  const out = cur.map((b) => ({ le: b.le, count: b.count - (before.get(b.le) ?? 0) }))
  return out.some((b) => b.count < 0) ? cur.map((b) => ({ le: b.le, count: b.count })) : out
}

/**
 * The q-quantile (0 <= q <= 1) of the observations in cumulative `buckets` (sorted by `le`, the
 * last one `+Inf` holding the total), by linear interpolation inside the bucket holding rank
 * q * total. The first bucket starts at 0 (or at its bound when that is negative); a rank in the
 * `+Inf` bucket answers the highest finite bound. `undefined` when there are no observations.
 */
export function histogramQuantile(q: number, buckets: readonly CumulativeBucket[]): number | undefined {
  if (!(q >= 0 && q <= 1)) {
    throw new RangeError(`quantile must be in [0, 1], got ${q}`)
  }
  const first = buckets[0]
  const last = buckets[buckets.length - 1]
  if (!first || !last || !(last.count > 0)) {
    return undefined
  }
  const total = last.count
  const rank = q * total
  let prevLe = Math.min(0, first.le)
  let prevCount = 0
  for (const b of buckets) {
    if (b.count >= rank && b.count > prevCount) {
      if (b.le === Infinity) {
        // Prometheus answers the upper bound of the highest finite bucket.
        return b === first ? undefined : prevLe
      }
      return prevLe + (b.le - prevLe) * ((rank - prevCount) / (b.count - prevCount))
    }
    prevLe = b.le
    prevCount = b.count
  }
  return prevLe === Infinity ? undefined : prevLe
}

/**
 * Per-bucket (non-cumulative) counts of cumulative buckets: how many observations fell in
 * (previous le, le].
 */
export function bucketCounts(buckets: readonly CumulativeBucket[]): CumulativeBucket[] {
  let before = 0
  return buckets.map((b) => {
    const n = Math.max(0, b.count - before)
    before = Math.max(before, b.count)
    return { le: b.le, count: n }
  })
}
