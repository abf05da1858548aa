/**
 * Batching configuration: the policy, its knobs, their defaults, and the one place where options
 * are merged over defaults and validated.
 * @module
 */

/** Every dispatch policy, as a value (for validation and iteration). */
export const POLICIES = ['eager', 'timer', 'deadline'] as const

/**
 * How the engine decides when to dispatch.
 * - `'eager'`: work-conserving. Whenever an executor slot is free and something is queued, dispatch
 *   (after the current I/O turn), taking up to `maxBatchSize` items. No timer.
 * - `'timer'`: the Triton/TorchServe comparison policy. A group dispatches when it holds
 *   `maxBatchSize` items (or `maxBatchCost`) or its oldest item has waited `maxDelayMs`, and only
 *   when a slot is free.
 * - `'deadline'`: least slack / EDF. Items in (priority, deadline) order; the largest batch whose
 *   upper cost estimate still meets the tightest deadline in it; items that cannot meet their
 *   deadline even alone are expired `'doomed'`; an uncut batch may wait for company up to
 *   `maxDelayMs` and never past its latest feasible start. Needs cost samples; eager until then.
 */
export type Policy = (typeof POLICIES)[number]

/** Knobs of the batching engine; all can be changed at run time with `BatchEngine.configure`. */
export interface BatchingConfig {
  /**
   * Largest number of items in one batch. An integer >= 1.
   * @default 32
   */
  maxBatchSize: number
  /**
   * Under `'timer'`: how long (ms) a group's oldest item may wait before the group dispatches
   * anyway. Under `'deadline'`: the longest wait for company (also bounded by the slack).
   * >= 0; `Infinity` means "only when full". Ignored under `'eager'`.
   * @default 5
   */
  maxDelayMs: number
  /**
   * Dispatch policy.
   * @default 'eager'
   */
  policy: Policy
  /**
   * Most items that may wait in the queue; `push` returns false at this size. An integer >= 1.
   * Lowering it below the current queue length keeps what is queued and refuses new pushes.
   * @default 4096
   */
  maxQueue: number
  /**
   * Largest summed `QueueEntry.cost` of one batch (> 0, `Infinity` for none), like TEI's
   * `max_batch_tokens`. A batch always takes at least one item, even one whose cost alone
   * exceeds it. Optional for compatibility; resolved configurations always carry it.
   * @default Infinity
   */
  maxBatchCost?: number
  /**
   * Admission at enqueue (`'eager'` and `'deadline'`): refuse an arriving item at once (`offer`
   * answers `'late'`) when the cost model estimates it would finish after its deadline behind the
   * work already queued. See `admission.ts`. Optional for compatibility.
   * @default true
   */
  admission?: boolean
  /**
   * Self-tuned batch cap: the engine moves its largest batch within `[1, maxBatchSize]` to the
   * size that serves the most items per second while a batch still fits the items' latency
   * budget (see `batch-tuner.ts`); `maxBatchSize` stays the hard cap. Off: every batch may take
   * `maxBatchSize` items. Optional for compatibility. (Workers turn it on for their models.)
   * @default false
   */
  autoBatchSize?: boolean
}

/** A configuration with every field present, as held by the engine. */
export type ResolvedBatchingConfig = Required<BatchingConfig>

/** The defaults used for every `BatchingConfig` field that is not given. */
export const DEFAULT_BATCHING: Readonly<ResolvedBatchingConfig> = Object.freeze({
  maxBatchSize: 32,
  maxDelayMs: 5,
  policy: 'eager',
  maxQueue: 4096,
  maxBatchCost: Infinity,
  admission: true,
  autoBatchSize: false,
})

function isPositiveInteger(n: unknown): boolean {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1
}

/**
 * Check a complete configuration.
 * @throws RangeError when `maxBatchSize` or `maxQueue` is not an integer >= 1, `maxDelayMs` is
 * negative or NaN, `policy` is not one of `POLICIES`, or `maxBatchCost` (when present) is not a
 * number > 0, or `admission` / `autoBatchSize` (when present) is not a boolean.
 */
export function validateBatchingConfig(config: BatchingConfig): void {
  if (!isPositiveInteger(config.maxBatchSize)) {
    throw new RangeError(`maxBatchSize must be an integer >= 1, got ${String(config.maxBatchSize)}`)
  }
  if (typeof config.maxDelayMs !== 'number' || Number.isNaN(config.maxDelayMs) || config.maxDelayMs < 0) {
    throw new RangeError(`maxDelayMs must be a number >= 0, got ${String(config.maxDelayMs)}`)
  }
  if (!(POLICIES as readonly unknown[]).includes(config.policy)) {
    throw new RangeError(`policy must be one of ${POLICIES.join(', ')}, got ${String(config.policy)}`)
  }
  if (!isPositiveInteger(config.maxQueue)) {
    throw new RangeError(`maxQueue must be an integer >= 1, got ${String(config.maxQueue)}`)
  }
  const cost = config.maxBatchCost
  if (cost !== undefined && !(typeof cost === 'number' && cost > 0)) {
    throw new RangeError(`maxBatchCost must be a number > 0, got ${String(cost)}`)
  }
  for (const key of ['admission', 'autoBatchSize'] as const) {
    if (config[key] !== undefined && typeof config[key] !== 'boolean') {
      throw new RangeError(`${key} must be a boolean, got ${String(config[key])}`)
    }
  }
}

/**
 * Merge `patch` over `base` (fields that are absent or `undefined` keep the base value), validate
 * the result and return it frozen. Extra keys in `patch` (for example engine options) are ignored.
 * @default base `DEFAULT_BATCHING`
 * @throws RangeError as `validateBatchingConfig`.
 */
export function resolveBatchingConfig(
  patch: Partial<BatchingConfig> = {},
  base: Readonly<BatchingConfig> = DEFAULT_BATCHING,
): Readonly<ResolvedBatchingConfig> {
  const config: ResolvedBatchingConfig = {
    maxBatchSize: patch.maxBatchSize ?? base.maxBatchSize,
    maxDelayMs: patch.maxDelayMs ?? base.maxDelayMs,
    policy: patch.policy ?? base.policy,
    maxQueue: patch.maxQueue ?? base.maxQueue,
    maxBatchCost: patch.maxBatchCost ?? base.maxBatchCost ?? Infinity,
    admission: patch.admission ?? base.admission ?? true,
    autoBatchSize: patch.autoBatchSize ?? base.autoBatchSize ?? false,
  }
  validateBatchingConfig(config)
  return Object.freeze(config)
}
