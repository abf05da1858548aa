/**
 * The engine's queue: items kept per group, each group in (priority desc, fair tag, arrival)
 * order. Pure data structure; it knows nothing about policies or time beyond the stamps it stores.
 *
 * Fair shares between tenants: start-time fair queueing (SFQ, Goyal et al. 1996), the
 * virtual-time form of weighted fair queueing that needs no knowledge of the service rate. Each
 * arrival of tenant `t` gets the tag `S = max(V, F_t)` and moves `F_t = S + cost / weight_t`,
 * where `V` is the largest tag dispatched so far and `F_t` the tenant's last finish tag (reset to
 * `V` once the tenant has nothing queued). Within a priority level items run in tag order, so
 * backlogged tenants share batch slots in proportion to their weights whatever their arrival
 * rates, and a tenant that was quiet starts at `V`, at the front. With one tenant the tags grow
 * with arrival: the order is plain arrival order, as before.
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
  /** Its tenant (`''`: anonymous). */
  readonly tenant: string
  /** Start tag of start-time fair queueing (see the module comment). */
  readonly tag: number
}

/** True when `a` should run before `b`: higher priority, then the earlier fair tag, then earlier arrival. */
export function runsBefore(a: Queued<unknown>, b: Queued<unknown>): boolean {
  return a.priority > b.priority || (a.priority === b.priority && (a.tag < b.tag || (a.tag === b.tag && a.seq < b.seq)))
}

/** Per-tenant bookkeeping: items queued and the last finish tag. */
interface TenantState {
  queued: number
  finish: number
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

  /** Items queued per tenant, only tenants with items (bounded by the queue size). */
  readonly #tenants = new Map<string, TenantState>()
  /** Virtual time: the largest tag dispatched so far. */
  #vtime = 0

  /** The tag an arrival of a tenant with nothing queued gets now: the virtual time. */
  get virtualTime(): number {
    return this.#vtime
  }

  /** The tag an arrival of `tenant` would get now (see the module comment); nothing changes. */
  tagFor(tenant: string): number {
    const t = this.#tenants.get(tenant)
    return t === undefined ? this.#vtime : Math.max(this.#vtime, t.finish)
  }

  /** Items of `tenant` queued now. */
  queuedOf(tenant: string): number {
    return this.#tenants.get(tenant)?.queued ?? 0
  }

  /** Tenants with queued items and how many each has. */
  tenants(): IterableIterator<[string, { readonly queued: number }]> {
    return this.#tenants.entries()
  }

  /** Record that `items` were dispatched: virtual time moves to their largest tag. */
  served(items: readonly Queued<unknown>[]): void {
    for (const item of items) {
      if (item.tag > this.#vtime) {
        this.#vtime = item.tag
      }
    }
  }

  /**
   * Add an item and return its stored form. `weight` (> 0) scales the tenant's share: its finish
   * tag moves by `cost / weight`.
   */
  add(value: T, deadline: number, group: string, priority: number, now: number, cost = 1, tenant = '', weight = 1): Queued<T> {
    const tag = this.tagFor(tenant)
    const w = Number.isFinite(weight) && weight > 0 ? weight : 1
    const t = this.#tenants.get(tenant)
    if (t === undefined) {
      this.#tenants.set(tenant, { queued: 1, finish: tag + cost / w })
    } else {
      t.queued++
      t.finish = tag + cost / w
    }
    const item: Queued<T> = { value, deadline, group, priority, cost, seq: this.#seq++, enqueuedAt: now, tenant, tag }
    let list = this.#groups.get(group)
    if (list === undefined) {
      list = []
      this.#groups.set(group, list)
    }
    list.splice(insertionPoint(list, priority, tag), 0, item)
    this.#costs.set(group, (this.#costs.get(group) ?? 0) + cost)
    this.#size++
    return item
  }

  #left(items: readonly Queued<T>[]): void {
    for (const item of items) {
      const t = this.#tenants.get(item.tenant)
      if (t !== undefined && --t.queued <= 0) {
        this.#tenants.delete(item.tenant)
      }
    }
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
    this.#left(removed)
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
    this.#left(taken)
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

  /** The names of the groups holding items. */
  groupNames(): string[] {
    return [...this.#groups].filter(([, l]) => l.length > 0).map(([g]) => g)
  }

  /** The items of each non-empty group, in (priority desc, arrival) order. Do not mutate. */
  groups(): IterableIterator<readonly Queued<T>[]> {
    return this.#groups.values()
  }
}

/**
 * Where an item of (`priority`, `tag`) goes in a list sorted by (priority desc, tag asc, arrival):
 * after every item of higher priority, and of equal priority with a tag not after `tag` (so the
 * count of items that run before it, too).
 */
export function insertionPoint(list: readonly Queued<unknown>[], priority: number, tag: number): number {
  let lo = 0
  let hi = list.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const q = list[mid] as Queued<unknown>
    if (q.priority > priority || (q.priority === priority && q.tag <= tag)) {
      lo = mid + 1
    } else {
      hi = mid
    }
  }
  return lo
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
