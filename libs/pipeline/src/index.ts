/**
 * Pipelines: preprocess -> predict -> postprocess (and fan-out/fan-in) as separate stages, each
 * with its own batching, run fused in one process or with stages on their own workers. Pure and
 * runtime-agnostic: ONNX execution and remote calls are ports the host (apps/worker) fills.
 * See docs/pipelines.md.
 * @module
 */
export { Type } from '@sinclair/typebox'
export type { Static, TSchema } from '@sinclair/typebox'
export { itemError, ItemError } from '@cohort/predictor'
export {
  type CohortConfig,
  CONFIG_BRAND,
  type FanOutStage,
  type ItemTensor,
  type LeafStage,
  type OnnxStage,
  type Pipeline,
  PIPELINE_BRAND,
  type Placement,
  type Stage,
  type StageBatchConfig,
  type StageContext,
  type StageFlowConfig,
  type TsStage,
} from './types.ts'
export {
  DEFAULT_STAGE_MAX_BATCH_SIZE,
  DEFAULT_STAGE_MAX_DELAY_MS,
  defineConfig,
  definePipeline,
  fanOut,
  type FanOutDefinition,
  isConfig,
  isPipeline,
  leafStages,
  onnxStage,
  type OnnxStageDefinition,
  type PipelineDefinition,
  stage,
  STAGE_NAME_RE,
  type StageDefinition,
} from './define.ts'
export { isItemTensor, itemTensor, sameTensorLayout, tensorGroupKey } from './tensors.ts'
export { fromWireValue, toWireValue, TYPED, type TypedName } from './wire.ts'
export {
  decodeBatch,
  decodeStagePart,
  decodeStageResults,
  encodeBatch,
  encodeStagePart,
  encodeStageResults,
  type WireBatch,
  type WireColumn,
  type WireStagePart,
  type WireStageResult,
} from './wire-batch.ts'
export { pipelineMetrics, type PipelineMetrics } from './metrics.ts'
export { inProcessRunner, StageQueue, type StageQueueOptions, type StageRunner, toItemError } from './stage-queue.ts'
export { PipelineExecutor, type PipelineExecutorOptions } from './executor.ts'
