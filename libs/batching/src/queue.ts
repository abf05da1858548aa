/**
 * The engine's queue: items kept per group, each group in (priority desc, arrival) order.
 * Pure data structure; it knows nothing about policies or time beyond the stamps it stores.
 * @module
 */

/** An item as stored in the queue. */
export interface Queued<T> {
  readonly value: T
  readonly deadline: number
  readonly group: string
  readonly priority: number
  /** Size in cost units (`QueueEntry.cost`, default 1). */
  readonly cost: number
  /** Arrival order, unique and increasing. */
  readonly seq: number
  /** Push time (ms, engine clock). */
  readonly enqueuedAt: number
}

/** True when `a` should run before `b`: higher priority, then earlier arrival. */
export function runsBefore(a: Queued<unknown>, b: Queued<unknown>): boolean {
  return a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq)
}

/** Items kept per group, each group sorted by (priority desc, arrival). */
export class GroupedQueue<T> {
  readonly #groups = new Map<string, Queued<T>[]>()
  /** Summed item cost per group (kept with the lists, for O(1) admission estimates). */
  readonly #costs = new Map<string, number>()
  #size = 0
  #seq = 0

  /** Number of items queued over all groups. */
  get size(): number {
    return this.#size
  }

  /** Add an item and return its stored form. */
  add(value: T, deadline: number, group: string, priority: number, now: number, cost = 1): Queued<T> {
    const item: Queued<T> = { value, deadline, group, priority, cost, seq: this.#seq++, enqueuedAt: now }
    let list = this.#groups.get(group)
    if (list === undefined) {
      list = []
      this.#groups.set(group, list)
    }
    // New items arrive last, so they go after every item of equal or higher priority.
    let lo = 0
    let hi = list.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((list[mid] as Queued<T>).priority >= priority) {
        lo = mid + 1
      } else {
        hi = mid
      }
    }
    list.splice(lo, 0, item)
    this.#costs.set(group, (this.#costs.get(group) ?? 0) + cost)
    this.#size++
    return item
  }

  /** Remove every item matching `pred`; returns them in arrival order. */
  removeWhere(pred: (item: Queued<T>) => boolean): Queued<T>[] {
    const removed: Queued<T>[] = []
    for (const [group, list] of this.#groups) {
      let gone = 0
      const kept = list.filter((item) => {
        if (pred(item)) {
          removed.push(item)
          gone += item.cost
          return false
        }
        return true
      })
      if (kept.length === 0) {
        this.#groups.delete(group)
        this.#costs.delete(group)
      } else if (kept.length !== list.length) {
        this.#groups.set(group, kept)
        this.#costs.set(group, (this.#costs.get(group) ?? 0) - gone)
      }
    }
    this.#size -= removed.length
    return removed.sort((a, b) => a.seq - b.seq)
  }

  /** Remove and return up to `n` items from the front of `group` (its best items). */
  take(group: string, n: number): Queued<T>[] {
    const list = this.#groups.get(group)
    if (list === undefined) {
      return []
    }
    const taken = list.splice(0, n)
    if (list.length === 0) {
      this.#groups.delete(group)
      this.#costs.delete(group)
    } else {
      this.#costs.set(group, (this.#costs.get(group) ?? 0) - taken.reduce((a, q) => a + q.cost, 0))
    }
    this.#size -= taken.length
    return taken
  }

  /**
   * The group whose best item runs first among all groups accepted by `accept` (highest priority,
   * then oldest), or `undefined` when none qualifies.
   */
  pick(accept: (items: readonly Queued<T>[]) => boolean = () => true): string | undefined {
    let best: Queued<T> | undefined
    for (const list of this.#groups.values()) {
      const head = list[0]
      if (head !== undefined && (best === undefined || runsBefore(head, best)) && accept(list)) {
        best = head
      }
    }
    return best?.group
  }

  /** Earliest deadline of any queued item; `Infinity` when none is finite or the queue is empty. */
  earliestDeadline(): number {
    let min = Infinity
    for (const list of this.#groups.values()) {
      for (const item of list) {
        if (item.deadline < min) {
          min = item.deadline
        }
      }
    }
    return min
  }

  /** Summed cost of the items of `group` (0 when none). */
  cost(group: string): number {
    return this.#costs.get(group) ?? 0
  }

  /** The items of `group` in (priority desc, arrival) order (empty when none). Do not mutate. */
  items(group: string): readonly Queued<T>[] {
    return this.#groups.get(group) ?? []
  }

  /** The items of each non-empty group, in (priority desc, arrival) order. Do not mutate. */
  groups(): IterableIterator<readonly Queued<T>[]> {
    return this.#groups.values()
  }
}

/** Earliest push time among `items`; `Infinity` when empty. */
export function oldestEnqueuedAt(items: readonly Queued<unknown>[]): number {
  let min = Infinity
  for (const item of items) {
    if (item.enqueuedAt < min) {
      min = item.enqueuedAt
    }
  }
  return min
}
