/**
 * The predictor API: `definePredictor` with a TypeBox input schema (JSON Schema with defaults),
 * per-item validation, per-item errors, and the mapping between JSON items and OIP tensors.
 * @module
 */
export { Type } from '@sinclair/typebox'
export type { Static, TSchema } from '@sinclair/typebox'
export * from './define.ts'
export * from './item-error.ts'
export * from './validate.ts'
export * from './tensor-items.ts'
export * from './model-config.ts'
