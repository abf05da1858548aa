import { batchingToJson, type BatchEngine, type LayeredBatching } from '@cohort/batching'
import type { ModelMeta } from '@cohort/protocol'
import type { ModelRunner } from '../runners/types.ts'

/** The live batching fields of the server's metadata (`batchingToJson` of the engine's config). */
type LiveBatching = Pick<ModelMeta, 'maxBatchSize' | 'maxDelayMs'> & Required<Pick<ModelMeta, 'policy' | 'maxQueue' | 'maxBatchCost' | 'admission'>>

/** Model metadata with the live batching config and where each value came from (`sources`). */
export function serverMeta<T>(runner: ModelRunner, engine: BatchEngine<T>, sources: LayeredBatching['sources']) {
  const m = runner.meta()
  const c = engine.config
  const cm = engine.costModel
  return {
    ...(cm.samples > 0 ? { cost: { a: cm.a, c: cm.c, samples: cm.samples } } : {}),
    ...m,
    ...(batchingToJson(c) as LiveBatching),
    ...batchCapMeta(engine),
    // A generative model announces no batch SLO (its engine batches nothing): its budgets are in
    // `generative.slo` (docs/generative.md#deadlines-and-the-server-slo).
    slo: m.kind === 'generative' ? undefined : engine.slo,
    configSources: { ...sources },
    ...(runner.batchLimit ? { batchLimit: runner.batchLimit } : {}),
    queued: engine.queued,
  }
}

/**
 * The self-tuned cap for model metadata (the dashboard and `/v2/models/{m}` show it):
 * `batchCap` (the cap in force), and under `autoBatchSize` `batchTuning` (changes by reason, the
 * latest change, the per-size curve measured, the latency budget).
 */
function batchCapMeta<T>(engine: BatchEngine<T>): Record<string, unknown> {
  const t = engine.tuner
  if (!t) {
    return { batchCap: engine.batchCap, autoBatchSize: false }
  }
  const last = t.last
  return {
    batchCap: engine.batchCap,
    autoBatchSize: true,
    batchTuning: {
      ...t.toJSON(),
      last: last ? { from: last.from, to: last.to, reason: last.reason, at: last.at, budgetMs: Number.isFinite(last.budgetMs) ? last.budgetMs : null } : null,
    },
  }
}
