/**
 * The time source the batching engine runs on. Injected so that tests drive time by hand
 * (see `FakeClock`) and so the engine itself performs no I/O.
 * @module
 */

/** Time and scheduling primitives used by the engine. All durations are in milliseconds. */
export interface Clock {
  /** Current time as epoch milliseconds (the same scale as `QueueEntry.deadline`). */
  now(): number
  /** Run `fn` once after `ms` milliseconds; returns a handle for `clearTimeout`. */
  setTimeout(fn: () => void, ms: number): unknown
  /** Cancel a timer returned by `setTimeout`. Unknown or already-fired handles are ignored. */
  clearTimeout(handle: unknown): void
  /**
   * Run `fn` after the current I/O turn, so that work arriving in the same turn is seen together.
   * @default `setImmediate` when the runtime has it, else `setTimeout(fn, 0)`
   */
  defer(fn: () => void): void
}

interface TimerGlobals {
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
  setImmediate?: (fn: () => void) => unknown
}

const g = globalThis as unknown as TimerGlobals

/**
 * The runtime's clock: epoch ms from `performance` (sub-millisecond), the global timers, and `setImmediate` (or `setTimeout 0` where
 * the runtime has no `setImmediate`) for `defer`.
 */
export const realClock: Clock = Object.freeze({
  // Sub-millisecond epoch time, so queue durations resolve below 1 ms.
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (fn: () => void, ms: number): unknown => g.setTimeout(fn, ms),
  clearTimeout: (handle: unknown): void => g.clearTimeout(handle),
  defer: (fn: () => void): void => {
    if (typeof g.setImmediate === 'function') {
      g.setImmediate(fn)
    } else {
      g.setTimeout(fn, 0)
    }
  },
})
