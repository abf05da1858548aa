/**
 * Admission at enqueue: estimate when a new item would finish, given the work queued ahead of it
 * and the batches running now, and refuse it at once when that is past its deadline.
 *
 * Early dropping (in the policies) decides at the head of the queue, after the item has waited;
 * admission decides on arrival, so the refusal costs the client microseconds instead of most of
 * its deadline, and the queue never holds work it cannot finish.
 * @module
 */
import type { ResolvedBatchingConfig } from './config.ts'
import type { CostModel } from './cost-model.ts'
import { EARLY_DROP_MIN_SAMPLES } from './fill.ts'
import { insertionPoint, type Queued } from './queue.ts'

/** What admission needs to know about the engine right now. */
export interface AdmissionState {
  now: number
  config: Readonly<ResolvedBatchingConfig>
  model: CostModel
  concurrency: number
  /** Expected end (engine clock) of every running batch. */
  runningEnds: readonly number[]
  /** The new item's group, in the queue's order (priority desc, arrival). */
  list: readonly Queued<unknown>[]
  /** Summed cost of `list`. */
  listCost: number
}

/** The new item, before it is queued. */
export interface Arrival {
  deadline: number
  priority: number
  cost: number
  /** Its fair-queueing tag (`GroupedQueue.tagFor`); absent: after every item of its priority. @default Infinity */
  tag?: number
}

/** The estimate behind an admission decision. */
export interface AdmissionEstimate {
  /** Estimated finish of the new item (engine clock, upper cost estimates). */
  finish: number
  /** Estimated start of the new item's batch (engine clock): `finish` less that batch's upper cost. */
  start: number
  /** Items of its group that run before it. */
  ahead: number
}

/**
 * The estimated queue wait of a new item (cost 1, priority 0) for the gateway's admission at the
 * door (docs/batching.md#admission-at-the-door): what `estimateFinish` would judge, split into the
 * wait before its batch starts and that batch's run. Ms, upper cost estimates.
 */
export interface QueueWait {
  /** Items queued now. */
  queued: number
  /** Ms until the batch of a new item of a tenant with nothing queued would start. */
  waitMs: number
  /** Ms that batch would run. */
  serviceMs: number
  /**
   * Ms each more queued item (cost 1) adds to the wait: a full batch's upper cost over its items
   * and the executors (`upper(maxBatchSize) / maxBatchSize / concurrency`). The gateway's door
   * adds it per request it admitted since the estimate came (docs/batching.md#admission-at-the-door).
   */
  itemMs: number
  /**
   * Ms a new item (cost 1) would run alone (the cost model's estimate of `t(1)`, not its upper bound): a deadline
   * shorter than this can never be met, however idle the worker (the door answers it 400
   * DEADLINE_TOO_SHORT without sending it).
   */
  aloneMs: number
  /** `waitMs` of a new item of each asked-for tenant (fair shares queue it behind its own items; `waitMs` when it has none). */
  tenants: Map<string, number>
}

/** Items (count, summed cost) of `list` that run before the arrival under the policy. */
function workAhead(s: AdmissionState, a: Arrival): { n: number; cost: number } {
  const list = s.list
  if (s.config.policy === 'deadline') {
    // (priority desc, deadline asc, arrival): the arrival overtakes later deadlines of its level.
    let n = 0
    let cost = 0
    for (const q of list) {
      if (q.priority > a.priority || (q.priority === a.priority && q.deadline <= a.deadline)) {
        n++
        cost += q.cost
      }
    }
    return { n, cost }
  }
  // (priority desc, fair tag, arrival): the list is sorted by it; the arrival goes after every
  // item of higher priority and every item of its priority with a tag not after its own.
  const lo = insertionPoint(list, a.priority, a.tag ?? Infinity)
  if (lo === list.length) {
    return { n: lo, cost: s.listCost }
  }
  let cost = 0
  for (let i = 0; i < lo; i++) {
    cost += (list[i] as Queued<unknown>).cost
  }
  return { n: lo, cost }
}

/**
 * Estimated finish of an arrival: the items ahead of it in its group run in batches of
 * `maxBatchSize` items (fewer when `maxBatchCost` binds, at their mean cost), each taking the cost
 * model's upper estimate, on the first executor slot to free up (running batches end at their own
 * upper estimates); the arrival's own batch is the last of them. Other groups are not counted
 * (they may not compete at all), so the estimate errs towards admitting. O(concurrency) after the
 * count of the work ahead (a binary search; a scan under `'deadline'`).
 */
export function estimateFinish(s: AdmissionState, a: Arrival): AdmissionEstimate {
  const { maxBatchSize, maxBatchCost } = s.config
  const ahead = workAhead(s, a)
  const items = ahead.n + 1
  const meanCost = (ahead.cost + a.cost) / items
  const perBatch = Math.max(1, Math.min(maxBatchSize, Math.floor(maxBatchCost / meanCost)))
  const batches = Math.ceil(items / perBatch)
  const full = s.model.upper(perBatch * meanCost)
  const own = s.model.upper((items - (batches - 1) * perBatch) * meanCost)
  // The batches ahead go round-robin over the slots in the order they free up (exact for equal
  // batch times); the arrival's batch takes the slot that is free first after them.
  const free = Array.from({ length: s.concurrency }, (_, i) => Math.max(s.now, s.runningEnds[i] ?? s.now)).sort((x, y) => x - y)
  const before = batches - 1
  const rounds = Math.floor(before / s.concurrency)
  const extra = before % s.concurrency
  let start = Infinity
  for (let i = 0; i < free.length; i++) {
    start = Math.min(start, (free[i] as number) + (rounds + (i < extra ? 1 : 0)) * full)
  }
  return { finish: start + own, start, ahead: ahead.n }
}

/**
 * Whether the engine should judge this arrival at all: only with `admission` on, only `'eager'` and `'deadline'` (the
 * `'timer'` policy is the comparison baseline and keeps its plain bounded queue), only with a
 * finite deadline, only once the cost model has `EARLY_DROP_MIN_SAMPLES` batches, and never when
 * its group is empty and a slot is free: it would start at once, and running it is how a stale,
 * pessimistic cost model gets corrected.
 */
export function shouldJudge(s: AdmissionState, a: Arrival, running: number): boolean {
  if (!s.config.admission || s.config.policy === 'timer' || !Number.isFinite(a.deadline) || s.model.samples < EARLY_DROP_MIN_SAMPLES) {
    return false
  }
  return !(s.list.length === 0 && running < s.concurrency)
}
