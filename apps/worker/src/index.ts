/**
 * The Cohort worker: serves ONNX models and TypeScript predictors from a transport (NATS or
 * in-process), batching requests with @cohort/batching and running ORT off the main thread.
 * @module
 */
export * from './worker.ts'
export * from './model-server.ts'
export * from './services.ts'
export * from './load.ts'
export * from './runners/types.ts'
export * from './runners/onnx-runner.ts'
export * from './runners/predictor-runner.ts'
export * from './ort/ort-pool.ts'
export * from './runners/padding.ts'
export * from './pipeline/index.ts'
export * from './jobs.ts'
export * from './runtime-source.ts'
export * from './repository/repository.ts'
export * from './repository/model-config.ts'
export * from './runners/generative-runner.ts'
export * from './load-generator.ts'
