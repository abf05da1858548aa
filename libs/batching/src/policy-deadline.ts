/**
 * The `'deadline'` policy: least slack / earliest deadline first, with the largest batch that
 * still meets its tightest deadline under the cost model's upper estimate.
 * @module
 */
import type { ResolvedBatchingConfig } from './config.ts'
import type { CostModel } from './cost-model.ts'
import { EARLY_DROP_MIN_SAMPLES, fill, type Plan } from './fill.ts'
import { oldestEnqueuedAt, type GroupedQueue, type Queued } from './queue.ts'
import type { DispatchReason } from './types.ts'

/**
 * A wait counts as over this close (ms) to its end, so that a timer whose due time was rounded
 * (epoch-ms floats have ~0.25 µs resolution) never re-arms itself in a loop.
 */
export const WAIT_EPSILON_MS = 1e-3

/** Order of the deadline policy: higher priority, then earlier deadline, then earlier arrival. */
export function edfCompare(a: Queued<unknown>, b: Queued<unknown>): number {
  return b.priority - a.priority || a.deadline - b.deadline || a.seq - b.seq
}

/**
 * True when `item` cannot meet its deadline even if dispatched alone now:
 * `now + upper(item.cost) > deadline`. Never true before the model's first sample.
 */
export function isDoomed(item: Queued<unknown>, model: CostModel, now: number): boolean {
  return model.samples > 0 && now + model.upper(item.cost) > item.deadline
}

/** What one group would dispatch, and from when. */
interface Candidate<T> {
  items: Queued<T>[]
  reason: DispatchReason
  /** The group may go once `now >= readyAt` (`-Infinity`: at once). */
  readyAt: number
  /** Overload: items to doom instead of dispatching (then `items` is empty). */
  late?: Queued<T>[]
}

/**
 * The candidate batch of one group. `list` is in `edfCompare` order and holds no doomed item.
 * Under overload (more than one batch's worth queued, `EARLY_DROP_MIN_SAMPLES` reached), the
 * items of the capped batch that would finish late in it are returned as `late` (early dropping,
 * so that full batches form, as in Nexus; otherwise the head stays late and batches shrink).
 * Else the batch is the longest prefix within the caps whose `now + upper(cost) <= tightest deadline`.
 * It goes at once when cut (by a deadline or a cap), when the model has no samples, or when
 * `maxDelayMs` is 0; otherwise it waits for company until `min(oldest arrival + maxDelayMs,
 * latest start)`, where latest start = tightest deadline - upper(cost).
 */
function candidate<T>(list: Queued<T>[], config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number): Candidate<T> {
  const f = fill(list, config)
  if (model.samples === 0) {
    return { items: list.slice(0, f.n), reason: f.full ? 'full' : 'idle', readyAt: -Infinity }
  }
  if (f.n < list.length && model.samples >= EARLY_DROP_MIN_SAMPLES) {
    const finish = now + model.upper(f.cost)
    const late = list.slice(0, f.n).filter((item) => item.deadline < finish)
    if (late.length > 0) {
      return { items: [], reason: 'deadline', readyAt: -Infinity, late }
    }
  }
  let n = 0
  let cost = 0
  let tightest = Infinity
  for (let k = 0; k < f.n; k++) {
    const item = list[k] as Queued<T>
    const nextCost = cost + item.cost
    const nextTightest = Math.min(tightest, item.deadline)
    if (k > 0 && now + model.upper(nextCost) > nextTightest) {
      break
    }
    n = k + 1
    cost = nextCost
    tightest = nextTightest
  }
  const items = list.slice(0, n)
  if (n < f.n) {
    return { items, reason: 'deadline', readyAt: -Infinity }
  }
  if (f.full || config.maxDelayMs === 0) {
    return { items, reason: f.full ? 'full' : 'idle', readyAt: -Infinity }
  }
  const latestStart = tightest - model.upper(cost)
  const waitEnd = oldestEnqueuedAt(list) + config.maxDelayMs
  return {
    items,
    reason: latestStart < waitEnd ? 'deadline' : 'timer',
    readyAt: Math.min(latestStart, waitEnd),
  }
}

/**
 * Each group's live items in `edfCompare` order, groups ordered by their first item. Doomed
 * items are appended to `doomed` instead.
 */
function edfLists<T>(queue: GroupedQueue<T>, model: CostModel, now: number, doomed: Queued<T>[]): Queued<T>[][] {
  const lists: Queued<T>[][] = []
  for (const items of queue.groups()) {
    const live: Queued<T>[] = []
    for (const item of items) {
      ;(isDoomed(item, model, now) ? doomed : live).push(item)
    }
    if (live.length > 0) {
      lists.push(live.sort(edfCompare))
    }
  }
  return lists.sort((x, y) => edfCompare(x[0] as Queued<T>, y[0] as Queued<T>))
}

/**
 * The deadline policy's decision: doom every item that cannot make it alone, then dispatch the
 * first group (by its best item) whose candidate batch is ready, or doom that group's
 * overload-late items (the engine then decides again). Groups still waiting for company do not
 * hold the slot from a ready group.
 */
export function planDeadline<T>(queue: GroupedQueue<T>, config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number): Plan<T> {
  const doomed: Queued<T>[] = []
  const lists = edfLists(queue, model, now, doomed)
  doomed.sort((x, y) => x.seq - y.seq)
  if (lists.length === 0) {
    const probe = probeBatch(doomed, config, now)
    if (probe) {
      return probe
    }
  }
  for (const list of lists) {
    const c = candidate(list, config, model, now)
    if (c.late !== undefined) {
      return { doomed: [...doomed, ...c.late].sort((x, y) => x.seq - y.seq) }
    }
    if (c.readyAt <= now + WAIT_EPSILON_MS) {
      return { doomed, batch: { group: (list[0] as Queued<T>).group, items: c.items, reason: c.reason } }
    }
  }
  return { doomed }
}

/**
 * Work-conserving fallback when the model dooms every queued item: if any of them has not yet
 * passed its deadline, run those with the most slack (one group, up to the caps) instead of
 * idling the executor. Without this, a stale, pessimistic estimate dooms everything, nothing runs,
 * the model never gets the samples that would correct it, and goodput stays at zero.
 */
function probeBatch<T>(doomed: Queued<T>[], config: Readonly<ResolvedBatchingConfig>, now: number): Plan<T> | undefined {
  const alive = doomed.filter((d) => d.deadline > now)
  if (alive.length === 0) {
    return undefined
  }
  alive.sort((x, y) => y.deadline - x.deadline || x.seq - y.seq)
  const group = (alive[0] as Queued<T>).group
  const items: Queued<T>[] = []
  let cost = 0
  for (const d of alive) {
    if (d.group !== group || items.length >= config.maxBatchSize) {
      continue
    }
    if (items.length > 0 && cost + d.cost > config.maxBatchCost) {
      continue
    }
    items.push(d)
    cost += d.cost
  }
  const taken = new Set(items)
  // The batch itself in the policy's order: priority, then deadline, then arrival.
  items.sort((x, y) => y.priority - x.priority || x.deadline - y.deadline || x.seq - y.seq)
  return { doomed: doomed.filter((d) => !taken.has(d)), batch: { group, items, reason: 'deadline' } }
}

/** The earliest instant (>= now) a group's wait for company ends; `Infinity` when none waits. */
export function deadlineWake(queue: GroupedQueue<unknown>, config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number): number {
  let at = Infinity
  for (const list of edfLists(queue, model, now, [])) {
    at = Math.min(at, Math.max(now, candidate(list, config, model, now).readyAt))
  }
  return at
}
