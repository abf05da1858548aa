import { BATCHING_KEYS, batchingToJson, layerBatching, parseBatchingPatch, type BatchEngine, type BatchingConfig, type ConfigLayer, type LayeredBatching } from '@cohort/batching'
import type { Logger } from '@cohort/observability'
import type { ModelRunner } from '../runners/types.ts'

/** Options of {@link BatchingLayers}. */
export interface BatchingLayersOptions {
  runner: ModelRunner
  workerId: string
  logger: Logger
  /** The command line's flags for every model (ModelServerOptions.batching). */
  batching?: Partial<BatchingConfig> | undefined
  /** This model's own flags (ModelServerOptions.modelBatching), over `batching`. */
  modelBatching?: Partial<BatchingConfig> | undefined
  /** The model repository's `config.json` batching (the `file` layer). */
  fileBatching?: Partial<BatchingConfig> | undefined
  /** Called with rejected runtime configuration (bad values). @default logger.error */
  onConfigError?: ((e: unknown) => void) | undefined
}

/**
 * A model server's batching configuration as layers (`@cohort/batching` layers.ts): the model's
 * own values, the flags for every model, this model's flags, and the runtime layer on top (the
 * stored config, or `configureRuntime` patches), checked against the runner's hard batch limit.
 */
export class BatchingLayers {
  readonly #o: BatchingLayersOptions
  /** The layers below the runtime override (model, flags). */
  readonly #layers: ConfigLayer[]
  #sources: LayeredBatching['sources']
  /** The runtime layer now applied (the stored config, or `configureRuntime` patches). */
  #runtime: Partial<BatchingConfig> = {}
  /** The configuration the engine starts with. */
  readonly initial: LayeredBatching['config']

  constructor(o: BatchingLayersOptions) {
    this.#o = o
    const global: Partial<BatchingConfig> = { ...o.batching }
    const limit = o.runner.batchLimit
    if (limit !== undefined && global.maxBatchSize !== undefined && global.maxBatchSize > limit.maxBatchSize) {
      // A flag for every model does not apply past one model's hard limit (a per-model flag or a
      // runtime override past it is refused instead).
      o.logger.warn(
        { model: o.runner.name, workerId: o.workerId, maxBatchSize: global.maxBatchSize, limit: limit.maxBatchSize, reason: limit.reason },
        "--max-batch-size is above this model's limit; the limit applies",
      )
      delete global.maxBatchSize
    }
    this.#layers = [
      { source: 'model', values: { ...o.runner.batchDefaults, ...(limit ? { maxBatchSize: Math.min(limit.maxBatchSize, o.runner.batchDefaults.maxBatchSize) } : {}) } },
      { source: 'file', values: { ...o.fileBatching } },
      { source: 'flags', values: global },
      { source: 'flags', values: { ...o.modelBatching } },
    ]
    const layered = this.#resolve({})
    this.#sources = layered.sources
    this.initial = layered.config
  }

  /** Where each live batching value came from (`default`, `model`, `file`, `flags`, `runtime`). */
  get sources(): LayeredBatching['sources'] {
    return this.#sources
  }

  /**
   * Apply a stored runtime configuration: its batching fields (`@cohort/batching`'s table, own
   * keys only; other keys are ignored). Bad values are reported, and nothing of that config applied.
   */
  applyStored<T>(engine: BatchEngine<T>, cfg: Record<string, unknown>): void {
    const { runner, workerId, logger: log } = this.#o
    const patch: Record<string, unknown> = {}
    for (const k of BATCHING_KEYS) {
      if (Object.hasOwn(cfg, k)) {
        patch[k] = cfg[k]
      }
    }
    try {
      // The stored config is the whole runtime layer: a field absent from it falls back to the
      // flags, the model's own value or the default (DELETE /admin/models/{m}/batching).
      const runtime = parseBatchingPatch(patch)
      const layered = this.#resolve(runtime)
      engine.configure(layered.config)
      this.#runtime = runtime
      this.#sources = layered.sources
      log.info({ model: runner.name, workerId, patch, batching: batchingSummary(engine, runner), sources: this.#sources }, 'batching configuration changed')
    } catch (e) {
      ;(this.#o.onConfigError ?? ((err: unknown) => log.error({ model: runner.name, workerId, patch, err }, 'batching configuration rejected')))(e)
    }
  }

  /**
   * Merge `patch` into the runtime layer in code (`CohortWorker.configure`); the stored config, when
   * it changes, replaces that layer as a whole.
   * @throws RangeError for values out of bounds or past the model's batch limit.
   */
  configureRuntime<T>(engine: BatchEngine<T>, patch: Partial<BatchingConfig>): void {
    const runtime = { ...this.#runtime }
    for (const k of BATCHING_KEYS) {
      if (patch[k] !== undefined) {
        ;(runtime as Record<string, unknown>)[k] = patch[k]
      }
    }
    const layered = this.#resolve(runtime)
    engine.configure(layered.config)
    this.#runtime = runtime
    this.#sources = layered.sources
  }

  /** The layers with `runtime` on top, checked against the runner's hard batch limit. */
  #resolve(runtime: Partial<BatchingConfig>): LayeredBatching {
    const r = layerBatching([...this.#layers, { source: 'runtime', values: runtime }])
    const runner = this.#o.runner
    const limit = runner.batchLimit
    if (limit !== undefined && r.config.maxBatchSize > limit.maxBatchSize) {
      throw new RangeError(
        `maxBatchSize ${r.config.maxBatchSize} (from ${r.sources.maxBatchSize}) exceeds model "${runner.name}"'s limit of ${limit.maxBatchSize}: ${limit.reason}`,
      )
    }
    return r
  }
}

/** The live batching settings, for log lines (`maxBatchCost` null when unlimited). */
export function batchingSummary<T>(engine: BatchEngine<T>, runner: ModelRunner): Record<string, unknown> {
  return { ...batchingToJson(engine.config), batchCap: engine.batchCap, concurrency: runner.concurrency }
}
