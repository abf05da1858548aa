// The per-batch time limit (docs/reliability.md#batch-time-limit): its default from the learned
// cost, and through a worker: a stuck batch answers 504 BATCH_TIMEOUT for its items only, the
// other requests are served after the restart, the restart is counted, and the stuck batch's time
// is not learned as a cost sample.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeReply, encodeRequest, subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker } from './worker.ts'
import { PredictorRunner } from './runners/predictor-runner.ts'
import { DEFAULT_BATCH_TIMEOUT_FLOOR_MS, batchTimeLimitMs, checkBatchTimeoutMs } from './batch-limit.ts'

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

describe('batchTimeLimitMs', () => {
  it('is 20 x the learned t(b), at least the floor; a configured value wins; 0 is none', () => {
    expect(batchTimeLimitMs(undefined, 0)).toBe(DEFAULT_BATCH_TIMEOUT_FLOOR_MS)
    expect(batchTimeLimitMs(undefined, 100)).toBe(DEFAULT_BATCH_TIMEOUT_FLOOR_MS)
    expect(batchTimeLimitMs(undefined, 2_000)).toBe(40_000)
    expect(batchTimeLimitMs(undefined, Number.NaN)).toBe(DEFAULT_BATCH_TIMEOUT_FLOOR_MS)
    expect(batchTimeLimitMs(250, 2_000)).toBe(250)
    expect(batchTimeLimitMs(0, 2_000)).toBe(0)
    expect(() => checkBatchTimeoutMs(-1)).toThrow(/batchTimeoutMs/)
    expect(() => checkBatchTimeoutMs(Number.POSITIVE_INFINITY)).toThrow(/batchTimeoutMs/)
    expect(() => checkBatchTimeoutMs(0)).not.toThrow()
  })
})

describe('a worker with a batch time limit', () => {
  it('answers a stuck batch with 504 BATCH_TIMEOUT, restarts the predictor, serves the next request, counts it', async () => {
    let setups = 0
    const p = definePredictor({
      name: 'stuck',
      input: Type.Object({ x: Type.Number(), hang: Type.Boolean({ default: false }) }),
      output: Type.Object({ y: Type.Number() }),
      batch: { maxBatchSize: 1 },
      setup: () => {
        setups++
      },
      predict: async (xs) => {
        if (xs.some((i) => i.hang)) {
          await new Promise(() => undefined)
        }
        return xs.map((i) => ({ y: i.x + 1 }))
      },
    })
    const t = new InProcessTransport()
    const w = new CohortWorker({ transport: t, runners: [new PredictorRunner(p)], heartbeatMs: 0, batchTimeoutMs: 200 })
    cleanups.push(async () => {
      await w.drain()
      await t.close()
    })
    await w.start()
    const s = subjects()
    const ask = (id: string, items: unknown[]) =>
      t.request(s.infer('stuck'), encodeRequest({ v: 1, id, model: 'stuck', deadline: Date.now() + 20_000, items }), { timeoutMs: 20_000 }).then(decodeReply)
    const stuck = ask('a', [{ x: 1, hang: true }])
    const next = ask('b', [{ x: 2 }])
    const a = await stuck
    expect(a.errors?.[0]).toMatchObject({ code: 'BATCH_TIMEOUT', message: expect.stringMatching(/time limit of 200 ms/) })
    expect((await next).items).toEqual([{ y: 3 }])
    expect(setups).toBe(2)
    const server = w.servers[0]!
    // The 200 ms of the stuck batch were not learned: only the quick batch was.
    expect(server.engine.costModel.samples).toBe(1)
    expect(server.engine.costModel.estimate(1)).toBeLessThan(200)
    expect(w.registry.render()).toMatch(/^cohort_runner_restarts_total\{model="stuck",reason="batch_timeout"\} 1$/m)
  })
})
