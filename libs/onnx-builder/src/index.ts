/**
 * Build ONNX model files deterministically from TypeScript: a minimal protobuf writer, a small
 * onnx.proto builder, a seeded PRNG and the models Cohort ships and tests with.
 * Runtime-agnostic: everything returns `Uint8Array`s.
 * @module
 */
export * from './protobuf.ts'
export * from './onnx.ts'
export * from './random.ts'
export * from './models.ts'
export * from './decoder.ts'
