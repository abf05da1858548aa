/** Nearest-rank percentile (0-100) of a sample; NaN when empty. Does not modify `xs`. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) {
    return Number.NaN
  }
  const s = [...xs].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * s.length)
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))] as number
}

/** Latency summary of a request sample, in ms. */
export interface LatencySummary {
  count: number
  p50Ms: number
  p99Ms: number
  meanMs: number
  maxMs: number
}

/** Summarise latencies given in ms. */
export function summarise(ms: readonly number[]): LatencySummary {
  const sum = ms.reduce((a, b) => a + b, 0)
  return {
    count: ms.length,
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    meanMs: ms.length ? sum / ms.length : Number.NaN,
    maxMs: ms.length ? Math.max(...ms) : Number.NaN,
  }
}
