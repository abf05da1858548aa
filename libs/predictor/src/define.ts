import type { Static, TSchema } from '@sinclair/typebox'

/** Context given to `setup`. */
export interface SetupContext {
  /** The model name it is served as: the predictor's own, or its folder's in a model repository */
  name: string
  /** Aborted when the worker shuts down. */
  signal: AbortSignal
}

/** Context given to each `predict` call. */
export interface PredictContext {
  /** Items in this batch. */
  batchSize: number
  /** Aborted when the worker shuts down. */
  signal: AbortSignal
}

/** Batching defaults of one predictor (overridable per worker). */
export interface PredictorBatchConfig {
  /** @default 32 */
  maxBatchSize?: number
  /** Max time to hold a batch open (used by the `timer` policy). @default 5 */
  maxDelayMs?: number
}

interface CommonDefinition<I extends TSchema> {
  /** Model name: `[A-Za-z0-9_.-]`, served at `/v2/models/<name>`. */
  name: string
  description?: string
  /** TypeBox schema of ONE input item (a JSON Schema object), with defaults. */
  input: I
  /** Optional TypeBox schema of one output item (drives metadata and tensor types). */
  output?: TSchema
  batch?: PredictorBatchConfig
  /**
   * Cost of one item in the units of the batch cost budget (`--max-batch-cost`), e.g. its token
   * count. @default every item costs 1
   */
  cost?(input: Static<I>): number
  /** Load weights, warm caches. Runs once before the predictor reports ready. */
  setup?(ctx: SetupContext): Promise<void> | void
  /** Release what setup took. */
  teardown?(): Promise<void> | void
}

/**
 * The batch form: `predict` gets every item of a batch and returns one result per item, in order.
 * A result that is an `Error` (see {@link itemError}) fails that item alone; a throw fails the batch.
 */
export interface BatchPredictorDefinition<I extends TSchema, O> extends CommonDefinition<I> {
  single?: false
  predict(inputs: Static<I>[], ctx: PredictContext): Promise<(O | Error)[]> | (O | Error)[]
}

/** The single form: `predict` gets one item (a batch of one). */
export interface SinglePredictorDefinition<I extends TSchema, O> extends CommonDefinition<I> {
  single: true
  predict(input: Static<I>, ctx: PredictContext): Promise<O> | O
}

/** A predictor as written by a user. */
export type PredictorDefinition<I extends TSchema = TSchema, O = unknown> = BatchPredictorDefinition<I, O> | SinglePredictorDefinition<I, O>

/** Brand that marks a value made by {@link definePredictor}. */
export const PREDICTOR_BRAND = Symbol.for('cohort.predictor')

/** A defined predictor, normalised to the batch form. */
export interface Predictor<I extends TSchema = TSchema, O = unknown> {
  readonly [PREDICTOR_BRAND]: true
  readonly name: string
  readonly description: string | undefined
  readonly input: I
  readonly output: TSchema | undefined
  readonly batch: Required<PredictorBatchConfig>
  /** Cost of one (validated) item; 1 when the definition gives no cost function. */
  cost(input: Static<I>): number
  setup(ctx: SetupContext): Promise<void>
  teardown(): Promise<void>
  /** Batch form always: one result per input; an Error result fails that item. */
  predictBatch(inputs: Static<I>[], ctx: PredictContext): Promise<(O | Error)[]>
}

/** Default max batch size of a predictor. */
export const DEFAULT_MAX_BATCH_SIZE = 32
/** Default max delay of a predictor, ms. */
export const DEFAULT_MAX_DELAY_MS = 5

/**
 * Define a batch predictor.
 * @example
 * export default definePredictor({
 *   name: 'echo',
 *   input: Type.Object({ text: Type.String(), times: Type.Integer({ default: 1 }) }),
 *   predict: (inputs) => inputs.map((i) => i.text.repeat(i.times)),
 * })
 */
export function definePredictor<I extends TSchema, O>(def: PredictorDefinition<I, O>): Predictor<I, O> {
  if (typeof def.name !== 'string' || def.name.length === 0) {
    throw new TypeError('definePredictor: name is required')
  }
  if (typeof def.predict !== 'function') {
    throw new TypeError(`definePredictor(${def.name}): predict must be a function`)
  }
  const single = def.single === true
  const batch = {
    maxBatchSize: single ? 1 : (def.batch?.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE),
    maxDelayMs: def.batch?.maxDelayMs ?? DEFAULT_MAX_DELAY_MS,
  }
  if (!Number.isInteger(batch.maxBatchSize) || batch.maxBatchSize < 1) {
    throw new RangeError(`definePredictor(${def.name}): batch.maxBatchSize must be an integer >= 1`)
  }
  const predictBatch = async (inputs: Static<I>[], ctx: PredictContext): Promise<(O | Error)[]> => {
    if (def.single === true) {
      const single = def
      return Promise.all(
        inputs.map(async (x) => {
          try {
            return await single.predict(x, ctx)
          } catch (e) {
            return e instanceof Error ? e : new Error(String(e))
          }
        }),
      )
    }
    const out = await def.predict(inputs, ctx)
    if (!Array.isArray(out) || out.length !== inputs.length) {
      throw new Error(`predictor ${def.name} returned ${Array.isArray(out) ? out.length : typeof out} results for ${inputs.length} inputs`)
    }
    return out
  }
  return {
    [PREDICTOR_BRAND]: true,
    name: def.name,
    description: def.description,
    input: def.input,
    output: def.output,
    batch,
    cost: (input) => {
      const c = def.cost ? def.cost(input) : 1
      if (!(typeof c === 'number' && Number.isFinite(c) && c > 0)) {
        throw new RangeError(`predictor ${def.name}: cost() must return a finite number > 0, got ${String(c)}`)
      }
      return c
    },
    setup: async (ctx) => {
      await def.setup?.(ctx)
    },
    teardown: async () => {
      await def.teardown?.()
    },
    predictBatch,
  }
}

/** True when `x` was made by {@link definePredictor}. */
export function isPredictor(x: unknown): x is Predictor {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[PREDICTOR_BRAND] === true
}
