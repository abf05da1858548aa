/**
 * Pure batching engine for Cohort workers: queue items with deadlines, groups and priorities,
 * and dispatch them in batches under an `'eager'` or `'timer'` policy onto a fixed number of
 * executor slots. No I/O; time comes from an injected `Clock`. See README.md.
 * @module
 */
export { realClock, type Clock } from './clock.ts'
export {
  DEFAULT_BATCHING,
  POLICIES,
  resolveBatchingConfig,
  validateBatchingConfig,
  type BatchingConfig,
  type Policy,
} from './config.ts'
export {
  DISPATCH_REASONS,
  EXPIRE_REASONS,
  type Batch,
  type BatchEngineOptions,
  type BatchStats,
  type DispatchReason,
  type ExpireReason,
  type QueueEntry,
} from './types.ts'
export { BatchEngine } from './engine.ts'
export { FakeClock, type FakeTimer } from './fake-clock.ts'
