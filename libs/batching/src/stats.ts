/**
 * Engine internals: the mutable form of `BatchStats`, and error reporting for callbacks.
 * @module
 */
import type { DispatchReason, ExpireReason, RefuseReason } from './types.ts'

/** `BatchStats` as the engine updates it. */
export interface MutableStats {
  dispatched: Record<DispatchReason, number>
  batches: number
  items: number
  expired: Record<ExpireReason, number>
  refused: Record<RefuseReason, number>
}

/** Fresh counters, all zero. */
export function emptyStats(): MutableStats {
  return {
    dispatched: { idle: 0, full: 0, timer: 0, deadline: 0 },
    batches: 0,
    items: 0,
    expired: { deadline: 0, cancelled: 0, closed: 0, doomed: 0 },
    refused: { full: 0, late: 0 },
  }
}

/**
 * Report an error nobody handles outside the engine's call stack, as an uncaught error, so that a
 * faulty callback can neither corrupt the engine's bookkeeping nor pass unnoticed.
 */
export function reportAsync(err: unknown): void {
  queueMicrotask(() => {
    throw err
  })
}
