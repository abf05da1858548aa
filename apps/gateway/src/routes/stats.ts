import { CohortError, modelFromToken, type DurationStat, type InferenceStatsData } from '@cohort/protocol'
import type { ReceivedStats } from '../discovery.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath } from './infer.ts'

/** One model in Triton's statistics answer (`GET /v2/models/{m}/stats`, gRPC `ModelStatistics`). */
export interface TritonModelStats {
  name: string
  version: string
  last_inference: number
  inference_count: number
  execution_count: number
  inference_stats: Record<'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output' | 'cache_hit' | 'cache_miss', DurationStat>
  batch_stats: { batch_size: number; compute_input: DurationStat; compute_infer: DurationStat; compute_output: DurationStat }[]
  memory_usage: never[]
}

const zero = (): DurationStat => ({ count: 0, ns: 0 })
const add = (a: DurationStat, b: DurationStat | undefined): void => {
  a.count += b?.count ?? 0
  a.ns += b?.ns ?? 0
}

/** Sum one model's statistics over the workers that reported them. */
function aggregate(model: string, parts: Partial<InferenceStatsData>[], version = '1'): TritonModelStats {
  const s: TritonModelStats = {
    name: model,
    version,
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: {
      success: zero(),
      fail: zero(),
      queue: zero(),
      compute_input: zero(),
      compute_infer: zero(),
      compute_output: zero(),
      cache_hit: zero(),
      cache_miss: zero(),
    },
    batch_stats: [],
    memory_usage: [],
  }
  const batches = new Map<number, DurationStat>()
  for (const p of parts) {
    s.last_inference = Math.max(s.last_inference, p.last_inference ?? 0)
    s.inference_count += p.inference_count ?? 0
    s.execution_count += p.execution_count ?? 0
    for (const k of ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output'] as const) {
      add(s.inference_stats[k], p[k])
    }
    for (const b of p.batch_stats ?? []) {
      const d = batches.get(b.batch_size) ?? zero()
      add(d, b.compute_infer)
      batches.set(b.batch_size, d)
    }
  }
  s.batch_stats = [...batches.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([batch_size, d]) => ({
      batch_size,
      compute_input: { count: d.count, ns: 0 },
      compute_infer: d,
      compute_output: { count: d.count, ns: 0 },
    }))
  return s
}

/**
 * Triton's model statistics, summed over every worker serving each model (from the workers'
 * `$SRV.STATS` answers): all models when `model` is undefined, else that one (404 if unknown).
 */
export async function modelStats(up: Upstream, model?: string, version?: string): Promise<{ model_stats: TritonModelStats[] }> {
  if (model !== undefined) {
    checkModelPath(model, version)
  }
  let byModel = collect(up, await up.services('STATS'), version)
  if (model !== undefined && !byModel.has(model)) {
    // A busy worker may miss the gather window once: ask again before answering 404/503.
    byModel = collect(up, await up.services('STATS'), version)
  }
  if (model !== undefined) {
    const parts = byModel.get(model)
    if (!parts && version !== undefined) {
      await up.meta(model, version)
      throw new CohortError('MODEL_NOT_FOUND', `no worker reported statistics for version "${version}" of model "${model}"`)
    }
    if (!parts) {
      // Not in any worker's stats: 404 for an unknown model, 503 for a known one without workers.
      await up.meta(model)
      throw new CohortError('NO_WORKER', `no worker reported statistics for model "${model}"`, { retryAfterS: 1 })
    }
    return { model_stats: [aggregate(model, parts, version)] }
  }
  return {
    model_stats: [...byModel.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([m, parts]) => aggregate(m, parts)),
  }
}

/**
 * Each model's statistics parts from the workers' `$SRV.STATS` answers (by infer subject); with
 * `version`, that version's only (a model without versions serves "1" on its bare subject).
 */
function collect(up: Upstream, stats: ReceivedStats[], version?: string): Map<string, Partial<InferenceStatsData>[]> {
  const byModel = new Map<string, Partial<InferenceStatsData>[]>()
  const prefix = up.subjects.infer('')
  for (const w of stats) {
    for (const e of w.endpoints) {
      if (typeof e.subject !== 'string' || !e.subject.startsWith(prefix)) {
        continue
      }
      // `<model token>` or `<model token>.<version>` (docs/protocol.md): versions add up per model.
      const [token, v] = e.subject.slice(prefix.length).split('.')
      if (version !== undefined && (v ?? '1') !== version) {
        continue
      }
      const name = modelFromToken(token ?? '')
      const list = byModel.get(name) ?? []
      if (e.data?.inference) {
        list.push(e.data.inference)
      }
      byModel.set(name, list)
    }
  }
  return byModel
}
