/**
 * The definition API: `stage`, `onnxStage`, `fanOut`, `definePipeline`, `defineConfig`.
 * Pure: definitions hold no resources; hosts (apps/worker) run them.
 * @module
 */
import type { TSchema } from '@sinclair/typebox'
import {
  CONFIG_BRAND,
  PIPELINE_BRAND,
  type CohortConfig,
  type FanOutStage,
  type LeafStage,
  type OnnxStage,
  type Pipeline,
  type Placement,
  type Stage,
  type StageBatchConfig,
  type StageContext,
  type StageFlowConfig,
  type TsStage,
} from './types.ts'

/** Default items per stage batch. */
export const DEFAULT_STAGE_MAX_BATCH_SIZE = 32
/** Default max hold time of a stage batch (timer policy), ms. */
export const DEFAULT_STAGE_MAX_DELAY_MS = 5

/** Stage names: one NATS subject token. */
export const STAGE_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/

function checkName(what: string, name: unknown): string {
  if (typeof name !== 'string' || !STAGE_NAME_RE.test(name)) {
    throw new TypeError(`${what}: name must match ${STAGE_NAME_RE.source}, got ${JSON.stringify(name)}`)
  }
  return name
}

function batchOf(what: string, b: StageBatchConfig | undefined): Required<StageBatchConfig> {
  const out = {
    maxBatchSize: b?.maxBatchSize ?? DEFAULT_STAGE_MAX_BATCH_SIZE,
    maxDelayMs: b?.maxDelayMs ?? DEFAULT_STAGE_MAX_DELAY_MS,
  }
  if (!Number.isInteger(out.maxBatchSize) || out.maxBatchSize < 1) {
    throw new RangeError(`${what}: batch.maxBatchSize must be an integer >= 1`)
  }
  if (!(out.maxDelayMs >= 0 && Number.isFinite(out.maxDelayMs))) {
    throw new RangeError(`${what}: batch.maxDelayMs must be a finite number >= 0`)
  }
  return Object.freeze(out)
}

function flowOf(what: string, f: StageFlowConfig): { instances: number | undefined; maxInflight: number } {
  if (f.instances !== undefined && !(Number.isInteger(f.instances) && f.instances >= 1)) {
    throw new RangeError(`${what}: instances must be an integer >= 1`)
  }
  const maxInflight = f.maxInflight ?? Infinity
  if (!(maxInflight === Infinity || (Number.isInteger(maxInflight) && maxInflight >= 1))) {
    throw new RangeError(`${what}: maxInflight must be an integer >= 1 or Infinity`)
  }
  return { instances: f.instances, maxInflight }
}

/** `p` from a definition (any value from a JavaScript caller). */
function placementOf(what: string, p: unknown): Placement {
  if (p === undefined) {
    return 'fused'
  }
  if (p !== 'fused' && p !== 'remote') {
    throw new TypeError(`${what}: placement must be 'fused' or 'remote'`)
  }
  return p
}

/** True when `v` (any value from a JavaScript caller) is a non-null object. */
function isObject(v: unknown): v is object {
  return typeof v === 'object' && v !== null
}

/** True when `s` (any value from a JavaScript caller) is a stage() or onnxStage(). */
function isLeafStage(s: unknown): boolean {
  return isObject(s) && 'kind' in s && (s.kind === 'ts' || s.kind === 'onnx')
}

/** Definition of a TypeScript stage. */
export interface StageDefinition<I, O> extends StageFlowConfig {
  name: string
  /** One result per item, in order. An Error result (`itemError`) fails that item alone; a throw fails the batch. */
  run: (items: I[], ctx: StageContext) => (O | Error)[] | Promise<(O | Error)[]>
  batch?: StageBatchConfig
  /** Cost units of one item (e.g. tokens) for the batch cost budget. @default 1 */
  cost?: (item: I) => number
  /** Items of different groups never share a batch. @default one group */
  group?: (item: I) => string
  /** Runs once where the stage is served, before it takes items. */
  setup?: () => Promise<void> | void
  /** @default 'fused' */
  placement?: Placement
}

/**
 * A TypeScript batch stage.
 * @example
 * stage<Row, Features>({ name: 'preprocess', run: (rows) => rows.map(toFeatures) })
 */
export function stage<I, O>(def: StageDefinition<I, O>): TsStage<I, O> {
  const name = checkName('stage', def.name)
  if (typeof def.run !== 'function') {
    throw new TypeError(`stage(${name}): run must be a function`)
  }
  return Object.freeze({
    kind: 'ts' as const,
    name,
    batch: batchOf(`stage(${name})`, def.batch),
    placement: placementOf(`stage(${name})`, def.placement),
    ...flowOf(`stage(${name})`, def),
    run: def.run,
    ...(def.cost ? { cost: def.cost } : {}),
    ...(def.group ? { group: def.group } : {}),
    ...(def.setup ? { setup: def.setup } : {}),
  })
}

/** Definition of an ONNX stage. */
export interface OnnxStageDefinition extends StageFlowConfig {
  name: string
  /** Path to the `.onnx` file: absolute, or relative to the config file's folder. */
  model: string
  batch?: StageBatchConfig
  /** @default 'fused' */
  placement?: Placement
}

/**
 * An ONNX model stage. Items are `Record<inputName, ItemTensor>` (no batch dim); results are
 * `Record<outputName, ItemTensor>`. Items of different shapes never share a batch.
 */
export function onnxStage(def: OnnxStageDefinition): OnnxStage {
  const name = checkName('onnxStage', def.name)
  if (typeof def.model !== 'string' || def.model.length === 0) {
    throw new TypeError(`onnxStage(${name}): model (a path to an .onnx file) is required`)
  }
  return Object.freeze({
    kind: 'onnx' as const,
    name,
    model: def.model,
    batch: batchOf(`onnxStage(${name})`, def.batch),
    placement: placementOf(`onnxStage(${name})`, def.placement),
    ...flowOf(`onnxStage(${name})`, def),
  })
}

/** Definition of a fan-out stage. */
export interface FanOutDefinition<I, S, R, O> {
  name: string
  /** The sub-items of one item (may be empty). */
  split: (item: I) => S[]
  /** Runs over the sub-items, batched across all sub-items of all requests. */
  stage: LeafStage
  /** One result per item from its sub-results (an Error in place of each failed sub-item). */
  merge: (item: I, results: (R | Error)[]) => O | Error
}

/** Fan-out and fan-in: `split` an item, run `stage` on every part, `merge` the results. */
export function fanOut<I, S, R, O>(def: FanOutDefinition<I, S, R, O>): FanOutStage<I, S, R, O> {
  const name = checkName('fanOut', def.name)
  if (typeof def.split !== 'function' || typeof def.merge !== 'function') {
    throw new TypeError(`fanOut(${name}): split and merge must be functions`)
  }
  if (!isLeafStage(def.stage)) {
    throw new TypeError(`fanOut(${name}): stage must be a stage() or onnxStage()`)
  }
  return Object.freeze({ kind: 'fanOut' as const, name, split: def.split, stage: def.stage, merge: def.merge })
}

/** Definition of a pipeline model. */
export interface PipelineDefinition {
  /** Model name, served at `/models/<name>/predictions` and `/v2/models/<name>`. */
  name: string
  description?: string
  /** TypeBox schema of one request item (Cog-style JSON input), with defaults. */
  input: TSchema
  /** Schema of one output item (drives metadata). */
  output?: TSchema
  /** End-to-end deadline of an item, ms; the request's own deadline wins when tighter. */
  deadlineMs?: number
  /** Run in order: the output of one is the input of the next. */
  stages: Stage[]
}

/** Every leaf stage of a pipeline (fan-out inner stages included), in order. */
export function leafStages(p: Pick<Pipeline, 'stages'>): LeafStage[] {
  return p.stages.map((s) => (s.kind === 'fanOut' ? s.stage : s))
}

/** Define a pipeline model. Stage names (fan-out inner stages included) must be unique. */
export function definePipeline(def: PipelineDefinition): Pipeline {
  if (typeof def.name !== 'string' || !/^[A-Za-z0-9_-][A-Za-z0-9_-]{0,127}$/.test(def.name)) {
    throw new TypeError(`definePipeline: name must match [A-Za-z0-9_-]{1,128}, got ${JSON.stringify(def.name)}`)
  }
  if (!isObject(def.input)) {
    throw new TypeError(`definePipeline(${def.name}): input schema is required`)
  }
  if (!Array.isArray(def.stages) || def.stages.length === 0) {
    throw new TypeError(`definePipeline(${def.name}): at least one stage is required`)
  }
  if (def.deadlineMs !== undefined && !(def.deadlineMs > 0)) {
    throw new RangeError(`definePipeline(${def.name}): deadlineMs must be > 0`)
  }
  const names = [...def.stages.map((s) => s.name), ...def.stages.flatMap((s) => (s.kind === 'fanOut' ? [s.stage.name] : []))]
  const dup = names.find((n, i) => names.indexOf(n) !== i)
  if (dup !== undefined) {
    throw new TypeError(`definePipeline(${def.name}): stage name "${dup}" is used twice`)
  }
  return Object.freeze({
    [PIPELINE_BRAND]: true as const,
    name: def.name,
    description: def.description,
    input: def.input,
    output: def.output,
    deadlineMs: def.deadlineMs,
    stages: Object.freeze([...def.stages]),
  })
}

/** The default export of `cohort.config.ts`. */
export function defineConfig(def: { models: Pipeline[] }): CohortConfig {
  if (!Array.isArray(def.models) || !def.models.every(isPipeline)) {
    throw new TypeError('defineConfig: models must be an array of definePipeline(...)')
  }
  const names = def.models.map((m) => m.name)
  const dup = names.find((n, i) => names.indexOf(n) !== i)
  if (dup !== undefined) {
    throw new TypeError(`defineConfig: model "${dup}" is defined twice`)
  }
  return Object.freeze({ [CONFIG_BRAND]: true as const, models: Object.freeze([...def.models]) })
}

/** True when `x` was made by {@link definePipeline}. */
export function isPipeline(x: unknown): x is Pipeline {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[PIPELINE_BRAND] === true
}

/** True when `x` was made by {@link defineConfig}. */
export function isConfig(x: unknown): x is CohortConfig {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[CONFIG_BRAND] === true
}
