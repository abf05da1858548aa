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
export * from './types.ts'
export * from './define.ts'
export * from './tensors.ts'
export * from './wire.ts'
export * from './wire-batch.ts'
export * from './metrics.ts'
export * from './stage-queue.ts'
export * from './executor.ts'
