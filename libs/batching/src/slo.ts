/**
 * The server-side SLO of a model: the deadline a request gets when its client sends none.
 *
 * Configured (`sloMs > 0`), it is that value. Derived (`sloMs: 0`, the default), it is
 * `max(SLO_FLOOR_MS, SLO_BATCHES * t(maxBatchSize))`, with `t` the learned cost model's estimate
 * at the model's limit `maxBatchSize` (never the self-tuned `batchCap`, which moves with load):
 * room for the batch running now, the batch ahead and the request's own, with margin. Before the
 * first cost sample it is `SLO_COLD_MS`. Never the gateway's 30 s default of queueing.
 * @module
 */
import type { ResolvedBatchingConfig } from './config.ts'
import type { CostModel } from './cost-model.ts'

/** Lowest derived SLO, ms: the floor for models whose batches take microseconds. */
export const SLO_FLOOR_MS = 1000
/** Batches of `t(maxBatchSize)` a derived SLO leaves room for. */
export const SLO_BATCHES = 4
/** The derived SLO before the cost model has a sample, ms (a cold start: first loads, warm-up). */
export const SLO_COLD_MS = 2000

/** Where an SLO came from: set by the operator, derived from the cost model, or the cold default. */
export type SloSource = 'configured' | 'derived' | 'cold'

/** A model's SLO now, ms, and its source. */
export interface Slo {
  ms: number
  source: SloSource
}

/** The SLO of a model under `config` with the learned `model` (see the module comment). */
export function serverSlo(config: Readonly<Pick<ResolvedBatchingConfig, 'sloMs' | 'maxBatchSize'>>, model: CostModel): Slo {
  if (config.sloMs > 0) {
    return { ms: config.sloMs, source: 'configured' }
  }
  if (model.samples === 0) {
    return { ms: SLO_COLD_MS, source: 'cold' }
  }
  const t = model.estimate(config.maxBatchSize)
  return { ms: Math.ceil(Math.max(SLO_FLOOR_MS, SLO_BATCHES * t)), source: 'derived' }
}
