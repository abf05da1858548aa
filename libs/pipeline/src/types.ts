/**
 * Public types of a pipeline definition: stages (TypeScript batch functions, ONNX models,
 * fan-out/fan-in), their batching and placement, and the pipeline model itself.
 * @module
 */
import type { Datatype } from '@cohort/protocol'
import type { TSchema } from '@sinclair/typebox'

/**
 * One item's tensor, WITHOUT the batch dimension (the worker stacks and unstacks rows).
 * `data` is the natural typed array of the datatype (`Float32Array` for FP32, `BigInt64Array`
 * for INT64, ...), or strings for BYTES.
 */
export interface ItemTensor {
  datatype: Datatype
  shape: number[]
  data: ArrayBufferView | string[]
}

/** Where a stage runs. */
export type Placement = 'fused' | 'remote'

/** Batching of one stage. */
export interface StageBatchConfig {
  /** Items per batch. @default 32 */
  maxBatchSize?: number
  /** Max hold time of a batch under the `timer` policy, ms. @default 5 */
  maxDelayMs?: number
}

/** Context given to each batch a stage runs. */
export interface StageContext {
  /** The pipeline (model) name. */
  pipeline: string
  /** The stage name. */
  stage: string
  /** Items in this batch. */
  batchSize: number
  /** Per item (same order as the items), its end-to-end deadline, epoch ms. */
  deadlines: number[]
  /** Aborted when the executor closes. */
  signal: AbortSignal
}

/** Instances and backpressure of one stage. */
export interface StageFlowConfig {
  /**
   * Batches of the stage that run at once where it runs: ORT sessions of an ONNX stage, concurrent
   * `run` calls of a TS stage. @default the host's (ONNX: `--instances`, 1; TS: 1)
   */
  instances?: number
  /**
   * Backpressure: most batches' worth of items (`maxInflight` × `maxBatchSize`) the stage holds,
   * queued or running, before the stage ahead of it waits to start its next batch (Triton's
   * `max_inflight_requests`). Items wait in the earlier stage's queue instead, where their
   * deadlines still apply. `Infinity`: no bound. @default Infinity
   */
  maxInflight?: number
}

/** What every stage has. */
interface StageCommon {
  readonly name: string
  readonly batch: Readonly<Required<StageBatchConfig>>
  /** The placement in the definition; the host may override it (CLI flags). */
  readonly placement: Placement
  /** Batches that run at once; undefined: the host's default. */
  readonly instances: number | undefined
  /** See {@link StageFlowConfig.maxInflight}. */
  readonly maxInflight: number
}

/** A TypeScript batch function: one result per item, in order; an Error result fails that item. */
export interface TsStage<I = unknown, O = unknown> extends StageCommon {
  readonly kind: 'ts'
  run(items: I[], ctx: StageContext): (O | Error)[] | Promise<(O | Error)[]>
  /** Cost units of one item for the batch cost budget. @default 1 */
  cost?(item: I): number
  /** Items of different groups never share a batch. @default one group */
  group?(item: I): string
  /** Runs once before the stage takes items. */
  setup?(): Promise<void> | void
}

/** An ONNX model over items `Record<inputName, ItemTensor>`, giving `Record<outputName, ItemTensor>`. */
export interface OnnxStage extends StageCommon {
  readonly kind: 'onnx'
  /** Path to the `.onnx` file: absolute, or relative to the config file's folder. */
  readonly model: string
}

/** A stage that computes batches: TS or ONNX. Only these can be placed remotely. */
export type LeafStage = TsStage | OnnxStage

/** One item splits into sub-items, each run through `stage` (batched across all items), then merged. */
export interface FanOutStage<I = unknown, S = unknown, R = unknown, O = unknown> {
  readonly kind: 'fanOut'
  readonly name: string
  split(item: I): S[]
  readonly stage: LeafStage
  merge(item: I, results: (R | Error)[]): O | Error
}

/** Any stage of a pipeline. */
export type Stage = LeafStage | FanOutStage

/** Brand of values made by {@link definePipeline}. */
export const PIPELINE_BRAND = Symbol.for('cohort.pipeline')
/** Brand of values made by {@link defineConfig}. */
export const CONFIG_BRAND = Symbol.for('cohort.config')

/** A defined pipeline: a model whose items run through `stages` in order. */
export interface Pipeline {
  readonly [PIPELINE_BRAND]: true
  /** Model name. */
  readonly name: string
  readonly description: string | undefined
  /** Schema of one request item (Cog-style JSON input), defaults applied before the first stage. */
  readonly input: TSchema
  readonly output: TSchema | undefined
  /** Default end-to-end deadline of an item, ms (the request's own deadline wins when tighter). */
  readonly deadlineMs: number | undefined
  readonly stages: readonly Stage[]
}

/** A `cohort.config.ts` default export. */
export interface CohortConfig {
  readonly [CONFIG_BRAND]: true
  readonly models: readonly Pipeline[]
}
