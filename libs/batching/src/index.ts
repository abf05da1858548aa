/**
 * Pure batching engine for Cohort workers: queue items with deadlines, groups and priorities,
 * and dispatch them in batches under an `'eager'`, `'timer'` or `'deadline'` policy onto a fixed
 * number of executor slots, learning the batch cost t(b) = a + c·b online (`CostModel`) for
 * deadline checks and early drops. No I/O; time comes from an injected `Clock` (`Deadlines`, many
 * deadlines on one timer of the runtime's, is for the gateway's packer and the runners' time limits).
 * See README.md.
 * @module
 */
export { realClock, type Clock } from './clock.ts'
export {
  BATCHING_FIELDS,
  BATCHING_KEYS,
  DEFAULT_BATCHING,
  MAX_BATCH_SIZE_LIMIT,
  MAX_DELAY_MS_LIMIT,
  MAX_QUEUE_LIMIT,
  POLICIES,
  batchingToJson,
  isBatchingKey,
  parseBatchingPatch,
  resolveBatchingConfig,
  validateBatchingConfig,
  type BatchingConfig,
  type BatchingField,
  type BatchingKey,
  type Policy,
  type ResolvedBatchingConfig,
} from './config.ts'
export { CONFIG_SOURCES, layerBatching, type ConfigLayer, type ConfigSource, type LayeredBatching } from './layers.ts'
export { CostModel, type CostModelOptions } from './cost-model.ts'
export { SLO_BATCHES, SLO_COLD_MS, SLO_FLOOR_MS, serverSlo, type Slo, type SloSource } from './slo.ts'
export {
  BatchTuner,
  CAP_REASONS,
  DEFAULT_START_CAP,
  capLevels,
  type BatchTunerOptions,
  type CapChange,
  type CapReason,
} from './batch-tuner.ts'
export { EARLY_DROP_MIN_SAMPLES } from './fill.ts'
export {
  DISPATCH_REASONS,
  EXPIRE_REASONS,
  REFUSE_REASONS,
  type Batch,
  type BatchEngineOptions,
  type BatchStats,
  type DispatchReason,
  type ExpireReason,
  type Offer,
  type QueueEntry,
  type RefuseReason,
} from './types.ts'
export { estimateFinish, type AdmissionEstimate, type AdmissionState, type Arrival, type QueueWait } from './admission.ts'
export { BatchEngine } from './engine.ts'
export { FakeClock, type FakeTimer } from './fake-clock.ts'
export { Deadlines, monotonicNow, type Deadlined, type DeadlinesOptions } from './deadlines.ts'
