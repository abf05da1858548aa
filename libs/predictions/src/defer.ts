/**
 * The wait before a job refused for load (OVERLOADED, SHUTTING_DOWN) is tried again: one policy
 * for durable jobs (the worker's nak delay) and in-memory jobs (the gateway's retry). A refusal
 * for load is not a run: it never counts toward a job's delivery budget.
 * @module
 */

/** Default first wait before a job refused for load is tried again: 1 s. */
export const DEFAULT_DEFER_DELAY_MS = 1_000

/** Default longest wait before a job refused for load is tried again: 10 s. */
export const DEFAULT_DEFER_MAX_DELAY_MS = 10_000

/** The error codes that refuse a job for load: trying again later can serve it. */
export const LOAD_REFUSALS: ReadonlySet<string> = new Set(['OVERLOADED', 'SHUTTING_DOWN'])

/**
 * Wait before try `n + 1` of a job refused for load `n` times (1-based), ms: `base` doubled per
 * refusal up to `max`, then a random half to all of it (jitter, so refused jobs do not return together).
 */
export function deferDelay(n: number, base: number, max: number, random: () => number = Math.random): number {
  const full = Math.min(max, base * 2 ** Math.min(30, Math.max(0, n - 1)))
  return Math.round(full * (0.5 + 0.5 * random()))
}
