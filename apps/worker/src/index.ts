/**
 * The Cohort worker: serves ONNX models and TypeScript predictors from a transport (NATS or
 * in-process), batching requests with @cohort/batching and running ORT off the main thread.
 * The public API is listed here by name (no module is re-exported whole): what is not here is
 * internal and may change without notice.
 * @module
 */
export { CohortWorker, DEFAULT_HEARTBEAT_MS, type CohortWorkerOptions, type WorkerRepositoryOptions } from './worker.ts'
export { ModelServer, type ModelServerOptions } from './model-server.ts'
export { WORKER_SERVICE_VERSION, WorkerServices, type WorkerServicesOptions } from './services.ts'
export { loadPredictors } from './load.ts'
export { TimeLimits, type ItemResult, type ModelRunner, type PreparedItem, type RestartReason, type RunBatchOptions, type RunnerEvents } from './runners/types.ts'
export { DEFAULT_ONNX_BATCH_LIMIT, OnnxRunner, type OnnxRunnerOptions } from './runners/onnx-runner.ts'
export { DEFAULT_INLINE_RUN_MS } from './ort/inline-lane.ts'
export { PredictorRunner, requestItems, type PredictorRunnerOptions } from './runners/predictor-runner.ts'
export {
  OrtPool,
  defaultIntraOpThreads,
  type ExecutionProvider,
  type HostTensor,
  type HostValueMeta,
  type OrtPoolObserver,
  type OrtPoolOptions,
  type OrtRunOptions,
  type RunResult,
} from './ort/ort-pool.ts'
export { DEFAULT_PAD_VALUE, type PaddingOptions } from './runners/padding.ts'
export { DEFAULT_BATCH_TIMEOUT_FLOOR_MS, DEFAULT_BATCH_TIMEOUT_MULTIPLE } from './batch-limit.ts'
export { buildPipelineRunners, localStageRunner, type PipelineRunnersOptions } from './pipeline/build.ts'
export { CONFIG_FILES, findConfigFile, loadConfig, type LoadedConfig } from './pipeline/load-config.ts'
export { OnnxStageRunner } from './pipeline/onnx-stage-runner.ts'
export { PipelineRunner } from './pipeline/pipeline-runner.ts'
export { DEFAULT_REMOTE_CONCURRENCY, DEFAULT_REMOTE_MAX_PARTS, RemoteStageRunner, type RemoteStageRunnerOptions } from './pipeline/remote-stage-runner.ts'
export { StageServerRunner, stageSubjects } from './pipeline/stage-server-runner.ts'
export { DEFAULT_GENERATION_PROBE_MS } from './model-server/generations.ts'
/** The time-to-first-token SLO ONNX decoders announce when none is given (`--ttft-slo-ms`). */
export { DEFAULT_TTFT_SLO_MS } from '@cohort/generative'
export { DEFAULT_JOB_ACK_WAIT_MS, DEFAULT_STORE_RETRY_MS, JobRunner, type JobTarget, type WorkerJobOptions } from './jobs.ts'
export { nodeRuntimeSource, type NodeRuntimeOptions, type NodeRuntimeSource } from './runtime-source.ts'
export {
  ModelRepository,
  defaultRunner,
  versionSubjects,
  type ModelRepositoryOptions,
  type RepositoryFlags,
  type RepositoryHost,
  type VersionToLoad,
} from './repository/repository.ts'
export {
  CONFIG_KEYS,
  DEFAULT_VERSION_POLICY,
  describePolicy,
  newestFirst,
  parseModelConfig,
  selectVersions,
  type RepositoryModelConfig,
  type VersionPolicy,
} from './repository/model-config.ts'
export { GenerativeRunner, type GeneratorFactory } from './runners/generative-runner.ts'
export { generativeRunner, loadGenerator } from './load-generator.ts'
