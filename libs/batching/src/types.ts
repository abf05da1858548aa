/**
 * Public data types of the batching engine: queue entries, batches, reasons, options and stats.
 * @module
 */
import type { CapChange } from './batch-tuner.ts'
import type { Clock } from './clock.ts'
import type { BatchingConfig } from './config.ts'
import type { CostModel } from './cost-model.ts'

/**
 * Why a batch was dispatched.
 * - `'idle'`: a slot was free and the batch took everything eligible in its group, with no wait
 *   (eager; deadline policy with no cost samples or `maxDelayMs` 0).
 * - `'full'`: the batch reached `maxBatchSize` or `maxBatchCost` (the next item did not fit).
 * - `'timer'`: timer policy, or deadline policy's wait for company: the group's oldest item
 *   waited `maxDelayMs`.
 * - `'deadline'`: deadline policy: the batch was cut short so that its tightest deadline is met,
 *   or its wait for company ended at its latest feasible start (no slack left).
 */
export type DispatchReason = 'idle' | 'full' | 'timer' | 'deadline'

/** Every `DispatchReason`, as a value. */
export const DISPATCH_REASONS = ['idle', 'full', 'timer', 'deadline'] as const satisfies readonly DispatchReason[]

/**
 * Why an item left the queue without being run.
 * - `'deadline'`: its deadline passed before it could be dispatched.
 * - `'cancelled'`: `BatchEngine.cancel` matched it.
 * - `'closed'`: `BatchEngine.close` was called while it was queued.
 * - `'doomed'`: its deadline had not passed yet, but the cost model's upper estimate said it
 *   could not finish in time (deadline policy: not even alone; eager under overload: not in the
 *   full batch about to run). Dropped before spending compute; answer it like `'deadline'`.
 */
export type ExpireReason = 'deadline' | 'cancelled' | 'closed' | 'doomed'

/** Every `ExpireReason`, as a value. */
export const EXPIRE_REASONS = ['deadline', 'cancelled', 'closed', 'doomed'] as const satisfies readonly ExpireReason[]

/**
 * Why `BatchEngine.offer` refused an item (nothing was queued).
 * - `'full'`: the queue holds `maxQueue` items.
 * - `'late'`: admission estimated that the item would finish after its deadline.
 */
export type RefuseReason = 'full' | 'late'

/** Every `RefuseReason`, as a value. */
export const REFUSE_REASONS = ['full', 'late'] as const satisfies readonly RefuseReason[]

/** The answer of `BatchEngine.offer`. */
export type Offer =
  | { status: 'queued' }
  | { status: 'closed' }
  | {
      status: RefuseReason
      /** How long (ms) until the queue has room for it: a hint for `Retry-After`. */
      retryAfterMs: number
      /** `'late'` only: the estimated finish, ms from now. */
      estimatedFinishMs?: number
      /**
       * `'late'` only: true when the item could not finish in time even if it ran alone now (its
       * deadline is shorter than the model's time): answer it 504 DEADLINE_EXCEEDED naming
       * {@link aloneMs}, not as overload (503) (the worker cannot tell a short deadline from one
       * spent on the way; the gateway's door, which can, answers the short ones 400 DEADLINE_TOO_SHORT).
       */
      infeasible?: boolean
      /** `'late'` only: the model's estimate of the item's run time alone, ms (the limit an infeasible deadline is under). */
      aloneMs?: number
      /** `'full'` only: true when the item's tenant is at its own bound `maxTenantQueue`. */
      tenant?: boolean
    }

/** One item offered to `BatchEngine.push`. */
export interface QueueEntry<T> {
  /** The caller's payload; handed back in `Batch.items` or to `expire`. */
  value: T
  /** Epoch ms after which the item is worthless; `Infinity` for none. Expired when `deadline <= now`. */
  deadline: number
  /**
   * Items of different groups never share a batch (for example: one group per model or shape).
   * @default ''
   */
  group?: string
  /**
   * Higher runs first. Ties go to the older item.
   * @default 0
   */
  priority?: number
  /**
   * Size of the item in cost units (for example tokens), counted against `maxBatchCost` and used
   * as the cost model's size variable. A finite number > 0.
   * @default 1
   */
  cost?: number
  /**
   * The tenant the item belongs to, for fair shares of batch slots (see `queue.ts`): within a
   * priority level, tenants' items interleave in proportion to their weights (start-time fair
   * queueing), so a flood from one tenant cannot push another's items back.
   * @default '' (the one anonymous tenant)
   */
  tenant?: string
}

/** A batch handed to `run`. */
export interface Batch<T> {
  /**
   * The payloads, in (priority desc, arrival) order; under `'deadline'`, in (priority desc,
   * deadline asc, arrival) order. Never empty.
   */
  items: T[]
  /** The group every item belongs to. */
  group: string
  /** Why it was dispatched. */
  reason: DispatchReason
  /** When dispatched (epoch ms, from the engine's clock). */
  startedAt: number
  /** Per item (same order as `items`), ms spent queued: `startedAt` minus push time. */
  queuedMs: number[]
  /** Summed `QueueEntry.cost` of the items (the item count when no costs are given). */
  cost?: number
  /**
   * Set by `run` when it knows how long the executor itself took (an ONNX Runtime thread's time in
   * `session.run`, ms): the cost model and the self-tuned cap then learn that instead of the wall
   * time from dispatch until `run` settled. That wall time also holds the calling thread's own
   * queue: under a flood of refusals the answer of a 0.3 ms batch waited milliseconds for the event
   * loop, the model looked 10x slower, the door refused what the worker could have served and the
   * tuner shrank the batch cap to 1 (docs/bench/moderate-load-2026-12-07.md). Unset, the wall time.
   */
  serviceMs?: number
}

/** Options of `new BatchEngine()`: the batching knobs plus the executor callbacks. */
export interface BatchEngineOptions<T> extends Partial<BatchingConfig> {
  /**
   * Executor slots: how many batches may run at once. An integer >= 1.
   * @default 1
   */
  concurrency?: number
  /**
   * Time source and scheduler.
   * @default realClock
   */
  clock?: Clock
  /**
   * The service-time model the engine feeds and the `'deadline'` policy and early drops consult
   * (pass one to share it or to start from measured values).
   * @default a new `CostModel()`
   */
  costModel?: CostModel
  /**
   * Execute a batch. The engine awaits it; the slot is busy until the promise settles. A rejection
   * (or a synchronous throw) is caught, passed to `onRunError`, and frees the slot.
   */
  run(batch: Batch<T>): Promise<void>
  /**
   * Called once for each item that leaves the queue without being run. Must not throw; if it does,
   * the error is rethrown asynchronously (the engine's bookkeeping is already done).
   */
  expire(value: T, reason: ExpireReason): void
  /**
   * Receives a rejection of `run`.
   * @default rethrow asynchronously, like an unhandled error
   */
  onRunError?(err: unknown, batch: Batch<T>): void
  /**
   * Called after each change of the self-tuned batch cap (`autoBatchSize`), with its reason and
   * figures. Must not throw (an error is rethrown asynchronously).
   */
  onCapChange?(change: CapChange): void
  /**
   * A tenant's weight: its share of batch slots under contention is proportional to it. A finite
   * number > 0 (anything else counts as 1). Read when an item is queued.
   * @default every tenant 1
   */
  tenantWeight?(tenant: string): number
}

/** Counters kept by the engine since construction. Live: the same object keeps updating. */
export interface BatchStats {
  /** Batches dispatched, by reason. */
  readonly dispatched: Readonly<Record<DispatchReason, number>>
  /** Batches dispatched in total. */
  readonly batches: number
  /** Items passed to `run` in total. */
  readonly items: number
  /** Items expired, by reason. */
  readonly expired: Readonly<Record<ExpireReason, number>>
  /** Items refused by `offer` (never queued), by reason. */
  readonly refused: Readonly<Record<RefuseReason, number>>
}
