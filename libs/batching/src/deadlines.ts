/** Many deadlines on one timer (the gateway's packer, the workers' batch time limits; not the door's lag-check.ts). Uses the runtime's `setTimeout`, as `realClock` does. @module */
/** An item {@link Deadlines} tracks: its deadline and its place in the heap (owned by Deadlines). */
export interface Deadlined {
  /** When it expires, on the clock of {@link DeadlinesOptions.now} (ms). */
  deadline: number
  /** Index in the heap; -1 when not tracked. Set by {@link Deadlines}. */
  heapIndex: number
}

/** Options of {@link Deadlines}. */
export interface DeadlinesOptions {
  /**
   * The clock (ms). @default `performance.now` where the runtime has it (monotonic, as `setTimeout`
   * is: a wall-clock step moves no deadline), else `Date.now`
   */
  now?: () => number
}

/** A monotonic clock where the runtime has one. */
export const monotonicNow: () => number =
  typeof globalThis.performance === 'object' && typeof globalThis.performance.now === 'function' ? () => globalThis.performance.now() : Date.now

/**
 * Many deadlines on one timer: a binary min-heap of items by deadline and a single `setTimeout`
 * armed for the earliest. Adding an item re-arms only when it expires before the armed time;
 * removing one is O(log n) and never re-arms (the timer may wake early, find nothing due, and arm
 * for the new earliest). Removing the last item leaves the timer armed but unref'd (it keeps no
 * process alive): a request that comes next, with a deadline no earlier, reuses it, so requests one
 * at a time create no timer each (issue 28's budgets); it wakes once, finds nothing, and ends. When
 * the timer fires, every item whose deadline has passed is removed and passed to `onExpire`, in
 * deadline order.
 */
export class Deadlines<T extends Deadlined> {
  readonly #heap: T[] = []
  readonly #onExpire: (item: T) => void
  readonly #now: () => number
  #timer: ReturnType<typeof setTimeout> | undefined
  /** The deadline the timer is armed for. */
  #armedFor = Number.POSITIVE_INFINITY

  constructor(onExpire: (item: T) => void, o: DeadlinesOptions = {}) {
    this.#onExpire = onExpire
    this.#now = o.now ?? monotonicNow
  }

  /** Items tracked. */
  get size(): number {
    return this.#heap.length
  }

  /** Whether the timer is armed (for tests: once it fired with nothing tracked, or after close, none). */
  get armed(): boolean {
    return this.#timer !== undefined
  }

  /** Track `item` until its `deadline` (already set), or until {@link remove}. */
  add(item: T): void {
    item.heapIndex = this.#heap.length
    this.#heap.push(item)
    this.#up(item.heapIndex)
    if (item.deadline < this.#armedFor) {
      this.#arm(item.deadline)
    } else if (this.#heap.length === 1) {
      refTimer(this.#timer, true) // the idle timer, armed for no later than this item: reused
    }
  }

  /** Stop tracking `item` (no-op when it is not tracked). */
  remove(item: T): void {
    const i = item.heapIndex
    if (i < 0 || this.#heap[i] !== item) {
      return
    }
    item.heapIndex = -1
    const last = this.#heap.pop()
    if (last !== undefined && last !== item) {
      this.#heap[i] = last
      last.heapIndex = i
      this.#down(i)
      this.#up(last.heapIndex)
    }
    if (this.#heap.length === 0) {
      refTimer(this.#timer, false)
    }
  }

  /** Stop the timer and forget every item (they do not expire). Idempotent. */
  close(): void {
    for (const it of this.#heap) {
      it.heapIndex = -1
    }
    this.#heap.length = 0
    this.#disarm()
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
    }
    this.#armedFor = at
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, at - this.#now()))
  }

  #disarm(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
    this.#armedFor = Number.POSITIVE_INFINITY
  }

  #fire(): void {
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const now = this.#now()
    // `onExpire` may add or remove items: take the top afresh each time.
    for (let top = this.#heap[0]; top !== undefined && top.deadline <= now; top = this.#heap[0]) {
      this.remove(top)
      this.#onExpire(top)
    }
    const next = this.#heap[0]
    if (next !== undefined && next.deadline < this.#armedFor) {
      this.#arm(next.deadline)
    }
  }

  #up(i: number): void {
    const h = this.#heap
    const it = h[i]
    if (it === undefined) {
      return
    }
    while (i > 0) {
      const p = (i - 1) >> 1
      const parent = h[p]
      if (parent === undefined || parent.deadline <= it.deadline) {
        break
      }
      h[i] = parent
      parent.heapIndex = i
      i = p
    }
    h[i] = it
    it.heapIndex = i
  }

  #down(i: number): void {
    const h = this.#heap
    const it = h[i]
    if (it === undefined) {
      return
    }
    for (;;) {
      const l = 2 * i + 1
      const left = h[l]
      if (left === undefined) {
        break // no child: l is past the end
      }
      const right = h[l + 1]
      let c = l
      let child = left
      if (right !== undefined && right.deadline < left.deadline) {
        c = l + 1
        child = right
      }
      if (child.deadline >= it.deadline) {
        break
      }
      h[i] = child
      child.heapIndex = i
      i = c
    }
    h[i] = it
    it.heapIndex = i
  }
}

/** Ref or unref a timer where the runtime's timers are objects with `ref`/`unref` (Node, Bun). */
function refTimer(t: ReturnType<typeof setTimeout> | undefined, on: boolean): void {
  const o = t as { ref?: () => void; unref?: () => void } | undefined
  if (typeof o === 'object') {
    ;(on ? o.ref : o.unref)?.call(o)
  }
}
