/**
 * Hung-batch detection of one model (docs/reliability.md#readiness-of-a-hung-model): a batch still
 * running past the latest deadline of its items, and past its expected run time, makes no progress
 * anyone can use. While one such batch runs, the model reports not ready; it is ready again as soon
 * as that batch ends (it completed, failed, or was cut by the batch time limit and its runner is
 * back). A long queue with batches completing is overload, not a stall: it never changes readiness.
 * Pure: an injected clock (epoch ms), no timers; checked when readiness is read.
 */
export class StallWatch {
  readonly #now: () => number
  /** The running batches: the time after which each counts as stalled. */
  readonly #running = new Set<{ stallAt: number }>()

  constructor(now: () => number = Date.now) {
    this.#now = now
  }

  /**
   * A batch starts: `deadline` is the latest deadline of its items (epoch ms), `expectedMs` a high
   * estimate of its run time (0 when unknown). Returns the function to call once it ended (idempotent).
   */
  begin(deadline: number, expectedMs = 0): () => void {
    const now = this.#now()
    const b = { stallAt: Math.max(deadline, now + (Number.isFinite(expectedMs) && expectedMs > 0 ? expectedMs : 0)) }
    this.#running.add(b)
    return () => {
      this.#running.delete(b)
    }
  }

  /** Ms since the oldest stalled batch passed its stall time; undefined when none is stalled. */
  stalledMs(): number | undefined {
    const now = this.#now()
    let worst: number | undefined
    for (const b of this.#running) {
      if (now > b.stallAt) {
        worst = Math.max(worst ?? 0, now - b.stallAt)
      }
    }
    return worst
  }

  /** True while some running batch is stalled. */
  get stalled(): boolean {
    return this.stalledMs() !== undefined
  }
}
