/**
 * Cohort's wire protocol: datatypes, tensors, the msgpack envelope, subjects and the error registry.
 * Pure and runtime-agnostic. See docs/protocol.md.
 * @module
 */
export * from './datatypes.ts'
export * from './tensor.ts'
export * from './envelope.ts'
export * from './generate.ts'
export * from './generate-codec.ts'
export * from './subjects.ts'
export * from './repository.ts'
export * from './subject-guard.ts'
export * from './errors.ts'
export * from './codec.ts'
export * from './tensor-data.ts'
export * from './fp16.ts'
export * from './services.ts'
export * from './depth.ts'
export { COHORT_VERSION } from './version.ts'
