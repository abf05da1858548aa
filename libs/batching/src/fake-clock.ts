/**
 * A hand-driven `Clock` for tests: time moves only through `advance`, deferred callbacks run only
 * through `flushDefers` / `advance` / `settle`.
 * @module
 */
import type { Clock } from './clock.ts'

/** A timer pending on a `FakeClock`. */
export interface FakeTimer {
  /** Absolute fire time (ms). */
  readonly due: number
  /** Creation order; breaks ties between timers with the same `due`. */
  readonly seq: number
}

interface Timer extends FakeTimer {
  readonly fn: () => void
}

/** Callbacks one `advance` or `settle` may run before it is treated as a runaway loop. */
const RUNAWAY_LIMIT = 100_000

interface MacrotaskGlobals {
  setImmediate?: (fn: () => void) => unknown
  setTimeout(fn: () => void, ms: number): unknown
}

/** Wait one real macrotask, so that every pending promise continuation has run. */
function realMacrotask(): Promise<void> {
  const g = globalThis as unknown as MacrotaskGlobals
  return new Promise((resolve) => {
    if (typeof g.setImmediate === 'function') {
      g.setImmediate(resolve)
    } else {
      g.setTimeout(resolve, 0)
    }
  })
}

/**
 * A deterministic `Clock`. `now()` starts at `start` and changes only in `advance`. Timers fire in
 * (due, creation) order; deferred callbacks run in FIFO order. Like a real event loop, `advance`
 * runs pending deferred callbacks before each timer and after the last one.
 *
 * Promise continuations (microtasks) do not run inside these synchronous calls; `await settle()`
 * when code under test reacts to a settled promise.
 */
export class FakeClock implements Clock {
  #now: number
  #seq = 0
  #timers: Timer[] = []
  #defers: (() => void)[] = []

  /** @param start initial `now()` in ms. @default 0 */
  constructor(start = 0) {
    this.#now = start
  }

  /** Current fake time (ms). */
  now(): number {
    return this.#now
  }

  /** Schedule `fn` at `now() + max(0, ms)`. Returns an opaque handle. */
  setTimeout(fn: () => void, ms: number): unknown {
    const timer: Timer = { due: this.#now + Math.max(0, ms), seq: this.#seq++, fn }
    this.#timers.push(timer)
    return timer
  }

  /** Cancel a timer; unknown or fired handles are ignored. */
  clearTimeout(handle: unknown): void {
    this.#timers = this.#timers.filter((t) => t !== handle)
  }

  /** Queue `fn` to run at the next `flushDefers` (or `advance` / `settle`). */
  defer(fn: () => void): void {
    this.#defers.push(fn)
  }

  /** Pending timers, sorted by (due, creation). A snapshot. */
  get timers(): readonly FakeTimer[] {
    return this.#sorted().map(({ due, seq }) => ({ due, seq }))
  }

  /** Number of deferred callbacks waiting. */
  get pendingDefers(): number {
    return this.#defers.length
  }

  /**
   * Run deferred callbacks in FIFO order, including those queued while flushing, until none is
   * left. Returns how many ran.
   * @throws Error when over 100,000 run in one call (a callback that keeps deferring itself).
   */
  flushDefers(): number {
    let ran = 0
    while (this.#defers.length > 0) {
      if (ran >= RUNAWAY_LIMIT) {
        throw new Error(`FakeClock: over ${RUNAWAY_LIMIT} deferred callbacks in one flush; runaway loop?`)
      }
      const fn = this.#defers.shift() as () => void
      ran++
      fn()
    }
    return ran
  }

  /**
   * Move time forward by `ms` (>= 0): flush deferred callbacks, then fire every timer due up to
   * `now() + ms` in (due, creation) order, setting `now()` to each timer's due time as it fires and
   * flushing deferred callbacks after each. Timers scheduled meanwhile fire too if due in range.
   * Ends with `now()` at the target. Returns how many callbacks (timers and deferred) ran.
   * @throws RangeError when `ms` is negative or NaN; Error when over 100,000 timers fire in one
   * call (a timer that keeps re-arming itself at or before the target).
   */
  advance(ms: number): number {
    if (!(ms >= 0)) {
      throw new RangeError(`advance(ms) needs ms >= 0, got ${ms}`)
    }
    const target = this.#now + ms
    let ran = this.flushDefers()
    for (let fired = 0; ; fired++) {
      const next = this.#sorted()[0]
      if (next === undefined || next.due > target) {
        break
      }
      if (fired >= RUNAWAY_LIMIT) {
        throw new Error(`FakeClock: over ${RUNAWAY_LIMIT} timers fired in one advance; runaway timer loop?`)
      }
      this.#timers = this.#timers.filter((t) => t !== next)
      this.#now = Math.max(this.#now, next.due)
      next.fn()
      ran += 1 + this.flushDefers()
    }
    this.#now = target
    return ran
  }

  /** Move time to the absolute instant `at` (no-op if it is not in the future). */
  advanceTo(at: number): number {
    return this.advance(Math.max(0, at - this.#now))
  }

  /**
   * Let everything due at the current time happen: repeatedly wait one real macrotask (so promise
   * continuations run), then run deferred callbacks and timers due now, until a round runs nothing.
   */
  async settle(): Promise<void> {
    let total = 0
    for (;;) {
      await realMacrotask()
      const ran = this.advance(0)
      if (ran === 0) {
        return
      }
      total += ran
      if (total > RUNAWAY_LIMIT) {
        throw new Error(`FakeClock: over ${RUNAWAY_LIMIT} callbacks in one settle; runaway loop?`)
      }
    }
  }

  #sorted(): Timer[] {
    return [...this.#timers].sort((a, b) => a.due - b.due || a.seq - b.seq)
  }
}
