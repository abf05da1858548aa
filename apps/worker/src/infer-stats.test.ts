import { describe, expect, it } from 'vitest'
import { InferStats } from './infer-stats.ts'

describe('InferStats', () => {
  it('counts batches per size and successful requests with their items, queue and compute times', () => {
    const s = new InferStats()
    s.batch(2, 3)
    s.batch(1, 1)
    s.batch(2, 5)
    s.request({ v: 1, id: 'a' }, 10, [
      { queueMs: 1, computeMs: 3, batchSize: 2 },
      { queueMs: 2, computeMs: 5, batchSize: 2 },
    ])
    s.request({ v: 1, id: 'b', error: { code: 'BAD_REQUEST', message: 'x' } }, 4, undefined)
    s.request({ v: 1, id: 'c', errors: [null, { code: 'INVALID_INPUT', message: 'y' }] }, 6, [])
    const snap = s.snapshot()
    expect(snap.execution_count).toBe(3)
    expect(snap.inference_count).toBe(2)
    expect(snap.success).toEqual({ count: 1, ns: 10e6 })
    expect(snap.fail).toEqual({ count: 2, ns: 10e6 })
    expect(snap.queue).toEqual({ count: 1, ns: 2e6 })
    expect(snap.compute_infer).toEqual({ count: 1, ns: 5e6 })
    expect(snap.batch_stats).toEqual([
      { batch_size: 1, compute_infer: { count: 1, ns: 1e6 } },
      { batch_size: 2, compute_infer: { count: 2, ns: 8e6 } },
    ])
    expect(snap.last_inference).toBeGreaterThan(0)
  })

  it('snapshots are copies', () => {
    const s = new InferStats()
    const a = s.snapshot()
    s.batch(1, 1)
    expect(a.execution_count).toBe(0)
    expect(a.batch_stats).toEqual([])
  })
})
