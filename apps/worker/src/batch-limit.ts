/**
 * The per-batch time limit of a model (docs/reliability.md#batch-time-limit): a batch still
 * running past it fails its items with BATCH_TIMEOUT (504) and its runner is replaced.
 * @module
 */

/** The default limit is this many times the learned cost t(b) of the batch (its high estimate). */
export const DEFAULT_BATCH_TIMEOUT_MULTIPLE = 20
/** The default limit is never below this, ms (a model that has not learned its cost yet gets it). */
export const DEFAULT_BATCH_TIMEOUT_FLOOR_MS = 10_000

/**
 * The time limit of one batch, in ms (0: none). `configured`: a fixed limit in ms, 0 for none, or
 * undefined for the default `max(FLOOR, MULTIPLE * tb)`, where `tb` is the cost model's high
 * estimate of the batch in ms (0 before it learned anything).
 */
export function batchTimeLimitMs(configured: number | undefined, tb: number): number {
  if (configured !== undefined) {
    return configured > 0 && Number.isFinite(configured) ? configured : 0
  }
  const learned = Number.isFinite(tb) && tb > 0 ? DEFAULT_BATCH_TIMEOUT_MULTIPLE * tb : 0
  return Math.max(DEFAULT_BATCH_TIMEOUT_FLOOR_MS, learned)
}

/** Check a configured limit: undefined, 0 (none) or a positive finite number of ms. */
export function checkBatchTimeoutMs(v: number | undefined): void {
  if (v !== undefined && !(v === 0 || (v > 0 && Number.isFinite(v)))) {
    throw new RangeError(`batchTimeoutMs must be 0 (no limit) or a positive number of ms, got ${String(v)}`)
  }
}
