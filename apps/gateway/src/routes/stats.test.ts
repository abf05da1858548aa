import { describe, expect, it } from 'vitest'
import { CohortError, subjects, type InferenceStatsData, type ServiceStatsResponse } from '@cohort/protocol'
import type { Upstream } from '../upstream.ts'
import { modelStats } from './stats.ts'

const subj = subjects()
const d = (count: number, ns: number) => ({ count, ns })

function part(n: number, batches: [number, number][]): InferenceStatsData {
  return {
    success: d(n, n * 10),
    fail: d(1, 5),
    queue: d(n, n),
    compute_input: d(n, 0),
    compute_infer: d(n, n * 3),
    compute_output: d(n, 0),
    inference_count: 2 * n,
    execution_count: batches.reduce((a, [, c]) => a + c, 0),
    last_inference: 1000 + n,
    batch_stats: batches.map(([batch_size, c]) => ({ batch_size, compute_infer: d(c, c * 7) })),
  }
}

function worker(id: string, models: Record<string, InferenceStatsData | undefined>): ServiceStatsResponse {
  return {
    type: 'io.nats.micro.v1.stats_response',
    name: 'cohort-worker',
    id,
    version: '0.1.0',
    metadata: {},
    started: new Date(0).toISOString(),
    endpoints: Object.entries(models).map(([m, inference]) => ({
      name: m,
      subject: subj.infer(m),
      queue_group: subj.queue(m),
      num_requests: 0,
      num_errors: 0,
      last_error: '',
      processing_time: 0,
      average_processing_time: 0,
      data: { queued: 0, running: 0, batches: 0, items: 0, mean_batch_size: 0, ...(inference ? { inference } : {}) },
    })),
  }
}

function upstream(answers: ServiceStatsResponse[]): Upstream {
  return {
    subjects: subj,
    services: () => Promise.resolve(answers),
    meta: (m: string) => Promise.reject(new CohortError('MODEL_NOT_FOUND', `model "${m}" is not served by any worker`)),
  } as unknown as Upstream
}

describe('modelStats', () => {
  const up = upstream([
    worker('w1', {
      demo: part(3, [
        [1, 2],
        [2, 1],
      ]),
      other: part(1, [[1, 1]]),
    }),
    worker('w2', { demo: part(4, [[2, 3]]), old: undefined }),
  ])

  it("sums one model's statistics over its workers in Triton's shape", async () => {
    const { model_stats } = await modelStats(up, 'demo', '1')
    expect(model_stats).toHaveLength(1)
    const s = model_stats[0]!
    expect(s).toMatchObject({ name: 'demo', version: '1', inference_count: 14, execution_count: 6, last_inference: 1004 })
    expect(s.inference_stats.success).toEqual(d(7, 70))
    expect(s.inference_stats.fail).toEqual(d(2, 10))
    expect(s.inference_stats.compute_infer).toEqual(d(7, 21))
    expect(s.inference_stats.cache_hit).toEqual(d(0, 0))
    expect(s.batch_stats).toEqual([
      { batch_size: 1, compute_input: d(2, 0), compute_infer: d(2, 14), compute_output: d(2, 0) },
      { batch_size: 2, compute_input: d(4, 0), compute_infer: d(4, 28), compute_output: d(4, 0) },
    ])
  })

  it('lists every model, sorted; workers without statistics count as zero', async () => {
    const { model_stats } = await modelStats(up)
    expect(model_stats.map((s) => s.name)).toEqual(['demo', 'old', 'other'])
    expect(model_stats[1]!.inference_stats.success).toEqual(d(0, 0))
  })

  it('answers 404 for an unknown model or another version', async () => {
    await expect(modelStats(up, 'nope')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' })
    await expect(modelStats(up, 'demo', '2')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' })
  })
})
