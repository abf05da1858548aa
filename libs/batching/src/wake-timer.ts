/**
 * A single re-armable timer that fires at an absolute time on an injected clock.
 * @module
 */
import type { Clock } from './clock.ts'

/** Longest delay one timer may be armed for (the 32-bit limit of common runtimes). */
export const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * One timer, armed at an absolute instant. Re-arming at the same instant is a no-op; arming at
 * another clears the old one first, so at most one underlying timer exists at a time. Instants
 * further away than `MAX_TIMER_MS` fire early (at the limit); the callback is expected to
 * re-evaluate and re-arm.
 */
export class WakeTimer {
  readonly #clock: Clock
  readonly #onFire: () => void
  #armed = false
  #handle: unknown = undefined
  #at = Infinity

  constructor(clock: Clock, onFire: () => void) {
    this.#clock = clock
    this.#onFire = onFire
  }

  /** The instant the timer is armed for; `Infinity` when it is not armed. */
  get at(): number {
    return this.#at
  }

  /** Arm at `at` (epoch ms); `Infinity` clears. A past instant fires after a 0 ms delay. */
  set(at: number): void {
    if (at === Infinity) {
      this.clear()
      return
    }
    if (this.#armed && this.#at === at) {
      return
    }
    this.clear()
    const delay = Math.min(Math.max(0, at - this.#clock.now()), MAX_TIMER_MS)
    this.#armed = true
    this.#at = at
    this.#handle = this.#clock.setTimeout(() => {
      this.#armed = false
      this.#handle = undefined
      this.#at = Infinity
      this.#onFire()
    }, delay)
  }

  /** Disarm (no-op when not armed). */
  clear(): void {
    if (this.#armed) {
      this.#clock.clearTimeout(this.#handle)
      this.#armed = false
      this.#handle = undefined
      this.#at = Infinity
    }
  }
}
