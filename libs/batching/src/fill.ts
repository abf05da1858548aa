/**
 * Batch filling under `maxBatchSize` and `maxBatchCost`, and the shape of a dispatch decision.
 * @module
 */
import type { ResolvedBatchingConfig } from './config.ts'
import type { Queued } from './queue.ts'
import type { DispatchReason } from './types.ts'

/**
 * Cost samples the model needs before `'eager'` and `'deadline'` drop items under overload (items
 * that would be late in the full batch about to run). Below it, the estimate (one or two batch
 * sizes, no error history) is too rough to refuse work on.
 */
export const EARLY_DROP_MIN_SAMPLES = 5

/** A batch chosen for dispatch. `items` are still in the queue; the engine removes them. */
export interface PlannedBatch<T> {
  group: string
  items: Queued<T>[]
  reason: DispatchReason
}

/** One dispatch decision: items to expire as `'doomed'`, and the batch to run now, if any. */
export interface Plan<T> {
  /** In arrival order; still in the queue. */
  doomed: Queued<T>[]
  batch?: PlannedBatch<T>
}

/** The longest prefix of a group that fits in one batch. */
export interface Fill {
  /** Items taken (>= 1 when the list is not empty). */
  n: number
  /** Their summed cost. */
  cost: number
  /** True when a cap ended it: `maxBatchSize` items, `maxBatchCost` reached, or the next item did not fit. */
  full: boolean
}

/**
 * The longest prefix of `items` with at most `maxBatchSize` items and at most `maxBatchCost` in
 * summed cost; always at least one item, even if that item's cost alone exceeds the budget.
 */
export function fill(items: readonly Queued<unknown>[], config: Readonly<ResolvedBatchingConfig>): Fill {
  const { maxBatchSize, maxBatchCost } = config
  let n = 0
  let cost = 0
  while (n < items.length && n < maxBatchSize) {
    const next = (items[n] as Queued<unknown>).cost
    if (n > 0 && cost + next > maxBatchCost) {
      return { n, cost, full: true }
    }
    cost += next
    n++
  }
  return { n, cost, full: n >= maxBatchSize || cost >= maxBatchCost }
}

/** Summed cost of `items`. */
export function sumCost(items: readonly Queued<unknown>[]): number {
  let cost = 0
  for (const item of items) {
    cost += item.cost
  }
  return cost
}
