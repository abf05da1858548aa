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
  /**
   * Server-side SLO (ms): the deadline a request gets when its client sends none (the gateway
   * applies it from what the workers announce). `0`: derived from the learned cost at the model's
   * limit, `max(SLO_FLOOR_MS, SLO_BATCHES * t(maxBatchSize))` (see `slo.ts`). Optional for
   * compatibility.
   * @default 0
   */
  sloMs?: number
  /**
   * Most items one tenant (`QueueEntry.tenant`) may have queued; `offer` answers `'full'` with
   * `tenant: true` past it. `0`: no bound of its own (only `maxQueue`). Optional for compatibility.
   * @default 0
   */
  maxTenantQueue?: number
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
  sloMs: 0,
  maxTenantQueue: 0,
})

/** Largest `maxBatchSize` accepted anywhere (options, flags, admin patches). */
export const MAX_BATCH_SIZE_LIMIT = 65_536
/** Largest `maxQueue` accepted anywhere. */
export const MAX_QUEUE_LIMIT = 1_048_576
/** Largest finite `maxDelayMs` accepted anywhere (1 hour); `Infinity` ("only when full") is allowed in code. */
export const MAX_DELAY_MS_LIMIT = 3_600_000

/** A batching field's name. */
export type BatchingKey = keyof BatchingConfig

/** How one batching field is checked and shown. */
export interface BatchingField {
  /** What a valid value is, for error messages. */
  readonly expect: string
  /** True when `v` is a valid value in code (numbers may be `Infinity` where the field allows it). */
  valid(v: unknown): boolean
  /**
   * The value a JSON document (an admin patch, the stored runtime config) means: `null` is "none"
   * (`Infinity`) for `maxBatchCost`; anything else must be `valid`.
   */
  fromJson(v: unknown): unknown
  /** The JSON form of a resolved value (`Infinity` becomes `null`). */
  toJson(v: unknown): unknown
  /** Command-line flag that sets it (`cohort serve|worker`), when there is one. */
  readonly flag?: string
  /** Its parameter in the Triton model configuration (`GET /v2/models/{m}/config`), when shown there. */
  readonly tritonParameter?: string
}

const isInt = (lo: number, hi: number) => (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi
const same = (v: unknown) => v
const infinityAsNull = (v: unknown) => (v === Infinity ? null : v)

function field(f: Omit<BatchingField, 'fromJson' | 'toJson'> & Partial<Pick<BatchingField, 'fromJson' | 'toJson'>>): BatchingField {
  return Object.freeze({ fromJson: same, toJson: same, ...f })
}

/**
 * The one table of batching fields: every reader of the batching knobs (the engine's checks, the
 * gateway's admin route, the worker's runtime config, model metadata and the Triton config route,
 * the CLI flags) goes through it. Only its own keys are fields: `toString`, `__proto__` and the
 * like are unknown.
 */
export const BATCHING_FIELDS: Readonly<Record<BatchingKey, BatchingField>> = Object.freeze({
  maxBatchSize: field({
    expect: `an integer from 1 to ${MAX_BATCH_SIZE_LIMIT}`,
    valid: isInt(1, MAX_BATCH_SIZE_LIMIT),
    flag: 'max-batch-size',
  }),
  maxDelayMs: field({
    expect: `a number of ms from 0 to ${MAX_DELAY_MS_LIMIT}`,
    valid: (v) => typeof v === 'number' && v >= 0 && (v <= MAX_DELAY_MS_LIMIT || v === Infinity),
    fromJson: (v) => (typeof v === 'number' && v >= 0 && v <= MAX_DELAY_MS_LIMIT ? v : undefined),
    flag: 'max-delay-ms',
    tritonParameter: 'cohort_max_delay_ms',
  }),
  policy: field({
    expect: `one of ${POLICIES.join(', ')}`,
    valid: (v) => (POLICIES as readonly unknown[]).includes(v),
    flag: 'policy',
    tritonParameter: 'cohort_policy',
  }),
  maxQueue: field({
    expect: `an integer from 1 to ${MAX_QUEUE_LIMIT}`,
    valid: isInt(1, MAX_QUEUE_LIMIT),
    flag: 'max-queue',
    tritonParameter: 'cohort_max_queue',
  }),
  maxBatchCost: field({
    expect: 'a number > 0 (null: no limit)',
    valid: (v) => typeof v === 'number' && v > 0,
    fromJson: (v) => (v === null ? Infinity : typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined),
    toJson: infinityAsNull,
    flag: 'max-batch-cost',
    tritonParameter: 'cohort_max_batch_cost',
  }),
  admission: field({
    expect: 'a boolean',
    valid: (v) => typeof v === 'boolean',
    flag: 'no-admission',
    tritonParameter: 'cohort_admission',
  }),
  autoBatchSize: field({
    expect: 'a boolean',
    valid: (v) => typeof v === 'boolean',
    flag: 'no-auto-batch',
    tritonParameter: 'cohort_auto_batch_size',
  }),
  sloMs: field({
    expect: `a number of ms from 0 (derived) to ${MAX_DELAY_MS_LIMIT}`,
    valid: (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_DELAY_MS_LIMIT,
    flag: 'slo-ms',
    tritonParameter: 'cohort_slo_ms',
  }),
  maxTenantQueue: field({
    expect: `an integer from 0 (none) to ${MAX_QUEUE_LIMIT}`,
    valid: isInt(0, MAX_QUEUE_LIMIT),
    flag: 'max-tenant-queue',
    tritonParameter: 'cohort_max_tenant_queue',
  }),
})

/** The batching fields' names, in table order. */
export const BATCHING_KEYS: readonly BatchingKey[] = Object.freeze(Object.keys(BATCHING_FIELDS) as BatchingKey[])

/** True when `key` is one of the table's own keys (never an inherited name such as `toString`). */
export function isBatchingKey(key: string): key is BatchingKey {
  return Object.hasOwn(BATCHING_FIELDS, key)
}

/**
 * Read a JSON patch of batching fields (an admin request body, the stored runtime config):
 * an object whose own keys are all fields, each with a valid JSON value (`null` clears
 * `maxBatchCost`). `undefined` and, unless `strict`, `null` values are skipped.
 * @throws RangeError naming the unknown key or the bad value and what was expected.
 */
export function parseBatchingPatch(body: unknown, opts: { strict?: boolean } = {}): Partial<BatchingConfig> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RangeError('batching settings must be a JSON object')
  }
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(body)) {
    if (!isBatchingKey(k)) {
      throw new RangeError(`unknown batching setting ${JSON.stringify(k)} (known: ${BATCHING_KEYS.join(', ')})`)
    }
    const raw = (body as Record<string, unknown>)[k]
    if (raw === undefined || (raw === null && !opts.strict && k !== 'maxBatchCost')) {
      continue
    }
    const v = BATCHING_FIELDS[k].fromJson(raw)
    if (v === undefined || !BATCHING_FIELDS[k].valid(v)) {
      // A function or symbol (from code, not JSON) has no JSON form: named by its type.
      const shown = typeof raw === 'function' || typeof raw === 'symbol' ? typeof raw : JSON.stringify(raw)
      throw new RangeError(`invalid value for ${k}: ${shown} (expected ${BATCHING_FIELDS[k].expect})`)
    }
    out[k] = v
  }
  return out
}

/** The JSON form of the batching fields present in `c` (`Infinity` becomes `null`), in table order. */
export function batchingToJson(c: Partial<BatchingConfig>): Record<BatchingKey, unknown> {
  const out: Record<string, unknown> = {}
  for (const k of BATCHING_KEYS) {
    out[k] = c[k] === undefined ? null : BATCHING_FIELDS[k].toJson(c[k])
  }
  return out
}

/**
 * Check a complete configuration against {@link BATCHING_FIELDS} (`maxBatchCost`, `admission` and
 * `autoBatchSize`, `sloMs`, `maxTenantQueue` may be absent).
 * @throws RangeError naming the first invalid field and what was expected.
 */
export function validateBatchingConfig(config: BatchingConfig): void {
  for (const k of BATCHING_KEYS) {
    const v = config[k]
    if (v === undefined && (k === 'maxBatchCost' || k === 'admission' || k === 'autoBatchSize' || k === 'sloMs' || k === 'maxTenantQueue')) {
      continue
    }
    if (!BATCHING_FIELDS[k].valid(v)) {
      throw new RangeError(`${k} must be ${BATCHING_FIELDS[k].expect}, got ${String(v)}`)
    }
  }
}

/**
 * Merge `patch` over `base` (fields that are absent or `undefined` keep the base value), validate
 * the result and return it frozen. Extra keys in `patch` (for example engine options) are ignored.
 * @default base `DEFAULT_BATCHING`
 * @throws RangeError as `validateBatchingConfig`.
 */
export function resolveBatchingConfig(patch: Partial<BatchingConfig> = {}, base: Readonly<BatchingConfig> = DEFAULT_BATCHING): Readonly<ResolvedBatchingConfig> {
  const config: ResolvedBatchingConfig = {
    maxBatchSize: patch.maxBatchSize ?? base.maxBatchSize,
    maxDelayMs: patch.maxDelayMs ?? base.maxDelayMs,
    policy: patch.policy ?? base.policy,
    maxQueue: patch.maxQueue ?? base.maxQueue,
    maxBatchCost: patch.maxBatchCost ?? base.maxBatchCost ?? Infinity,
    admission: patch.admission ?? base.admission ?? true,
    autoBatchSize: patch.autoBatchSize ?? base.autoBatchSize ?? false,
    sloMs: patch.sloMs ?? base.sloMs ?? 0,
    maxTenantQueue: patch.maxTenantQueue ?? base.maxTenantQueue ?? 0,
  }
  validateBatchingConfig(config)
  return Object.freeze(config)
}
