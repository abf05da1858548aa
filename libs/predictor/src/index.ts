/**
 * The predictor API: `definePredictor` with a TypeBox input schema (JSON Schema with defaults),
 * per-item validation, per-item errors, and the mapping between JSON items and OIP tensors.
 * @module
 */
export { Type } from '@sinclair/typebox'
export type { Static, TSchema } from '@sinclair/typebox'
export {
  type BatchPredictorDefinition,
  DEFAULT_MAX_BATCH_SIZE,
  DEFAULT_MAX_DELAY_MS,
  definePredictor,
  isPredictor,
  type PredictContext,
  type Predictor,
  PREDICTOR_BRAND,
  type PredictorBatchConfig,
  type PredictorDefinition,
  type SetupContext,
  type SinglePredictorDefinition,
} from './define.ts'
export { itemError, ItemError } from './item-error.ts'
export { validateItem } from './validate.ts'
export { assertCount, itemsToTensors, schemaToTensorMeta, tensorsToItems } from './tensor-items.ts'
export { defineModelConfig, type ModelConfig, type ModelConfigBatching } from './model-config.ts'
