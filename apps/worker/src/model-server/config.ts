import { BATCHING_KEYS, batchingToJson, parseBatchingPatch, type BatchEngine, type BatchingConfig } from '@cohort/batching'
import type { Logger } from '@cohort/observability'
import type { ModelRunner } from '../runners/types.ts'

/** The batching config a server starts with: the runner's defaults under the given overrides. */
export function initialBatching(runner: ModelRunner, batching: Partial<BatchingConfig> | undefined): Partial<BatchingConfig> {
  const given: Partial<BatchingConfig> = { ...runner.batchDefaults }
  for (const k of BATCHING_KEYS) {
    if (batching?.[k] !== undefined) {
      ;(given as Record<string, unknown>)[k] = batching[k]
    }
  }
  return {
    maxBatchSize: runner.batchDefaults.maxBatchSize,
    maxDelayMs: runner.batchDefaults.maxDelayMs,
    ...given,
  }
}

/** Where {@link applyBatchingConfig} reports. */
export interface ConfigContext<T> {
  engine: BatchEngine<T>
  runner: ModelRunner
  workerId: string
  logger: Logger
  onConfigError?: ((e: unknown) => void) | undefined
}

/**
 * Apply a stored runtime configuration: its batching fields (`@cohort/batching`'s table, own
 * keys only; other keys are ignored). Bad values are reported, and nothing of that config applied.
 */
export function applyBatchingConfig<T>(cx: ConfigContext<T>, cfg: Record<string, unknown>): void {
  const patch: Record<string, unknown> = {}
  for (const k of BATCHING_KEYS) {
    if (Object.hasOwn(cfg, k)) {
      patch[k] = cfg[k]
    }
  }
  const log = cx.logger
  const model = cx.runner.name
  try {
    cx.engine.configure(parseBatchingPatch(patch))
    log.info({ model, workerId: cx.workerId, patch, batching: batchingSummary(cx.engine, cx.runner) }, 'batching configuration changed')
  } catch (e) {
    ;(cx.onConfigError ?? ((err: unknown) => log.error({ model, workerId: cx.workerId, patch, err }, 'batching configuration rejected')))(e)
  }
}

/** The live batching settings, for log lines (`maxBatchCost` null when unlimited). */
export function batchingSummary<T>(engine: BatchEngine<T>, runner: ModelRunner): Record<string, unknown> {
  return { ...batchingToJson(engine.config), batchCap: engine.batchCap, concurrency: runner.concurrency }
}
