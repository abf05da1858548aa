/**
 * Dispatch decisions as pure functions of the queue, the configuration, the cost model and the
 * time: the `'eager'` and `'timer'` policies here, `'deadline'` in `policy-deadline.ts`.
 * @module
 */
import type { ResolvedBatchingConfig } from './config.ts'
import type { CostModel } from './cost-model.ts'
import { EARLY_DROP_MIN_SAMPLES, fill, type Plan } from './fill.ts'
import { deadlineWake, planDeadline } from './policy-deadline.ts'
import { oldestEnqueuedAt, type GroupedQueue, type Queued } from './queue.ts'

/**
 * Eager: the group of the best item (highest priority, then oldest), as much of it as fits.
 * Under overload (the group holds more than this batch can take, and the model has
 * `EARLY_DROP_MIN_SAMPLES`), the items of that batch that would finish after their deadline
 * (`now + upper(batch cost) > deadline`) are doomed instead, with no batch: the engine then
 * decides again, so the batch is refilled from behind (or another group goes first).
 */
function planEager<T>(queue: GroupedQueue<T>, config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number): Plan<T> {
  const group = queue.pick()
  if (group === undefined) {
    return { doomed: [] }
  }
  const list = queue.items(group)
  const f = fill(list, config)
  const items = list.slice(0, f.n)
  if (f.n < list.length && model.samples >= EARLY_DROP_MIN_SAMPLES) {
    const finish = now + model.upper(f.cost)
    const late = items.filter((item) => item.deadline < finish)
    if (late.length > 0) {
      return { doomed: late.sort((x, y) => x.seq - y.seq) }
    }
  }
  return { doomed: [], batch: { group, items, reason: f.full ? 'full' : 'idle' } }
}

/** True when a timer-policy group may go: it fills a batch, or its oldest item waited `maxDelayMs`. */
function ripe(items: readonly Queued<unknown>[], config: Readonly<ResolvedBatchingConfig>, now: number): boolean {
  return fill(items, config).full || oldestEnqueuedAt(items) + config.maxDelayMs <= now
}

/** Timer: like eager, but only among ripe groups, and with no early drops. */
function planTimer<T>(queue: GroupedQueue<T>, config: Readonly<ResolvedBatchingConfig>, now: number): Plan<T> {
  const group = queue.pick((items) => ripe(items, config, now))
  if (group === undefined) {
    return { doomed: [] }
  }
  const list = queue.items(group)
  const f = fill(list, config)
  return { doomed: [], batch: { group, items: list.slice(0, f.n), reason: f.full ? 'full' : 'timer' } }
}

/**
 * The decision to take now, assuming a slot is free and no queued item is past its deadline.
 * Pure: nothing is removed from the queue.
 */
export function plan<T>(queue: GroupedQueue<T>, config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number): Plan<T> {
  switch (config.policy) {
    case 'eager':
      return planEager(queue, config, model, now)
    case 'timer':
      return planTimer(queue, config, now)
    case 'deadline':
      return planDeadline(queue, config, model, now)
  }
}

/**
 * The next instant the engine must wake up by itself: the earliest queued deadline and, while a
 * slot is free, the end of the policy's wait (`'timer'`: a group's oldest item has waited
 * `maxDelayMs`; `'deadline'`: a group's wait for company is over). `Infinity` when nothing needs
 * a timer (including an empty queue).
 */
export function nextWake(queue: GroupedQueue<unknown>, config: Readonly<ResolvedBatchingConfig>, model: CostModel, now: number, slotFree: boolean): number {
  let at = queue.earliestDeadline()
  if (slotFree && config.policy === 'timer') {
    for (const items of queue.groups()) {
      at = Math.min(at, oldestEnqueuedAt(items) + config.maxDelayMs)
    }
  } else if (slotFree && config.policy === 'deadline') {
    at = Math.min(at, deadlineWake(queue, config, model, now))
  }
  return at
}
