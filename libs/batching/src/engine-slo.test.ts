import { describe, expect, it } from 'vitest'
import { SLO_BATCHES, SLO_COLD_MS, SLO_FLOOR_MS } from './slo.ts'
import { harness, type Harness } from './test-harness.ts'

/** Run `n` full batches of `size` items, each taking `t(size)` ms of fake time. */
async function runBatches(h: Harness<number>, size: number, t: (b: number) => number, n: number): Promise<void> {
  let v = 0
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < size; k++) {
      h.engine.push({ value: v++, deadline: Infinity })
    }
    h.clock.flushDefers()
    const run = h.pending()[0]!
    h.clock.advance(t(run.batch.items.length))
    await h.complete()
  }
}

describe('BatchEngine server-side SLO (sloMs)', () => {
  it('is the cold default before the first cost sample, never the 30 s gateway default', () => {
    const h = harness<number>({ maxBatchSize: 32 })
    expect(h.engine.slo).toEqual({ ms: SLO_COLD_MS, source: 'cold' })
    expect(SLO_COLD_MS).toBeLessThan(30_000)
  })

  it('is derived from the learned t(maxBatchSize): SLO_BATCHES batches at the limit', async () => {
    const h = harness<number>({ maxBatchSize: 64, admission: false })
    // t(b) = 20 + 5b ms: t(64) = 340 ms; batches of 8 and 64 teach the line.
    await runBatches(h, 8, (b) => 20 + 5 * b, 3)
    await runBatches(h, 64, (b) => 20 + 5 * b, 3)
    expect(h.engine.costModel.estimate(64)).toBeCloseTo(340, 6)
    expect(SLO_BATCHES * 340).toBeGreaterThan(SLO_FLOOR_MS)
    expect(h.engine.slo.source).toBe('derived')
    expect(Math.abs(h.engine.slo.ms - SLO_BATCHES * 340)).toBeLessThanOrEqual(1)
  })

  it('uses the limit maxBatchSize, not the self-tuned batch cap', async () => {
    const h = harness<number>({ maxBatchSize: 256, autoBatchSize: true, admission: false })
    expect(h.engine.batchCap).toBeLessThan(256)
    await runBatches(h, 32, (b) => 10 + 1 * b, 4)
    await runBatches(h, 8, (b) => 10 + 1 * b, 2)
    expect(h.engine.batchCap).not.toBe(256)
    // t(256) = 266 ms, whatever the cap is now.
    expect(SLO_BATCHES * 266).toBeGreaterThan(SLO_FLOOR_MS)
    expect(Math.abs(h.engine.slo.ms - SLO_BATCHES * 266)).toBeLessThanOrEqual(1)
  })

  it('has a floor for models whose batches take almost nothing', async () => {
    const h = harness<number>({ maxBatchSize: 32, admission: false })
    await runBatches(h, 4, (b) => 0.1 + 0.01 * b, 3)
    await runBatches(h, 32, (b) => 0.1 + 0.01 * b, 3)
    expect(h.engine.slo).toEqual({ ms: SLO_FLOOR_MS, source: 'derived' })
  })

  it('is the configured sloMs when set, and follows configure()', () => {
    const h = harness<number>({ maxBatchSize: 32, sloMs: 750 })
    expect(h.engine.slo).toEqual({ ms: 750, source: 'configured' })
    h.engine.configure({ sloMs: 0 })
    expect(h.engine.slo.source).toBe('cold')
    expect(() => h.engine.configure({ sloMs: -1 })).toThrow(/sloMs must be a number of ms from 0/)
  })
})
