/**
 * The event loop's current delay, sampled by a timer: how long a request that arrives now has
 * plausibly waited in the socket and parser queues before its handler runs. The gateway takes it
 * off each request's deadline and refuses requests it already exceeds (see `admitAtDoor`).
 * @module
 */

/** Options of {@link LoopLag}. */
export interface LoopLagOptions {
  /** Sampling interval, ms. @default 5 */
  intervalMs?: number
}

/** Samples event-loop delay with an unref'd interval timer. `close()` stops it (idempotent). */
export class LoopLag {
  readonly #intervalMs: number
  #last = performance.now()
  #lastDelay = 0
  #timer: ReturnType<typeof setInterval> | undefined

  constructor(opts: LoopLagOptions = {}) {
    this.#intervalMs = opts.intervalMs ?? 5
    this.#timer = setInterval(() => {
      const now = performance.now()
      this.#lastDelay = Math.max(0, now - this.#last - this.#intervalMs)
      this.#last = now
    }, this.#intervalMs)
    this.#timer.unref()
  }

  /**
   * The current delay, ms: the larger of the last tick's lateness and how overdue the next tick is
   * now (so a loop that is blocked right now reads as blocked before the timer gets to run).
   */
  current(): number {
    if (this.#timer === undefined) {
      return 0
    }
    const overdue = performance.now() - this.#last - this.#intervalMs
    return Math.max(this.#lastDelay, overdue, 0)
  }

  close(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }
}
