// PredictorRunner: predict() in a worker thread for modules loaded by path, output schemas checked
// per item, and a batch past its time limit (or a thread that died) replaced by a fresh thread
// with setup() run again, reported not ready until it is back.
import { threadId } from 'node:worker_threads'
import { afterEach, describe, expect, it } from 'vitest'
import { Type, definePredictor } from '@cohort/predictor'
import type { InferRequest } from '@cohort/protocol'
import { BUSY_PREDICTOR } from '@cohort/test-support'
import { loadPredictors } from '../load.ts'
import { PredictorRunner } from './predictor-runner.ts'
import type { ItemResult, RestartReason, RunnerEvents } from './types.ts'

const runners: PredictorRunner[] = []
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.close()))
})

type Out = { y: number; thread: number; setups: number }

async function threaded(): Promise<{ r: PredictorRunner; events: { restarting: RestartReason[]; restarted: RestartReason[] } }> {
  const [p] = await loadPredictors(BUSY_PREDICTOR)
  const r = new PredictorRunner(p!, { modulePath: BUSY_PREDICTOR })
  runners.push(r)
  const events = { restarting: [] as RestartReason[], restarted: [] as RestartReason[] }
  const ev: RunnerEvents = {
    restarting: (why) => events.restarting.push(why),
    restarted: (why) => events.restarted.push(why),
    restartFailed: () => undefined,
  }
  r.observe(ev)
  await r.start()
  return { r, events }
}

function payloads(r: PredictorRunner, items: unknown[]): unknown[] {
  const req: InferRequest = { v: 1, id: 'x', model: 'busy', deadline: Date.now() + 60_000, items }
  return r.prepare(req).map((it) => it.payload)
}

function json(res: ItemResult): Out {
  if (!('json' in res)) {
    throw new Error(`expected a value, got ${JSON.stringify(res)}`)
  }
  return res.json as Out
}

async function until(cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((res) => setTimeout(res, 20))
  }
}

// Each test starts predictor threads (tsx in the thread: 1-2 s idle, far more on a busy machine).
describe('PredictorRunner in a worker thread', { timeout: 60_000 }, () => {
  it('runs predict() off the main thread, which keeps its timers while predict() computes', async () => {
    const { r } = await threaded()
    let ticks = 0
    const t = setInterval(() => ticks++, 50)
    try {
      const [out] = await r.runBatch(payloads(r, [{ x: 2, busyMs: 1000 }]))
      expect(json(out!)).toMatchObject({ y: 4, setups: 1 })
      expect(json(out!).thread).not.toBe(threadId)
      // The main thread ran its timers during the second of computing (20 at an idle 50 ms; any
      // number above a handful shows they were not held up for the whole second).
      expect(ticks).toBeGreaterThanOrEqual(5)
    } finally {
      clearInterval(t)
    }
  })

  it('fails only the item whose output breaks the output schema (500 PREDICTOR_FAILED)', async () => {
    const { r } = await threaded()
    const out = await r.runBatch(payloads(r, [{ x: 1 }, { x: 2, bad: true }, { x: 3 }]))
    expect(json(out[0]!).y).toBe(2)
    expect(out[1]).toEqual({ error: { code: 'PREDICTOR_FAILED', message: expect.stringMatching(/item 1 that does not match its output schema: \/y:/) } })
    expect(json(out[2]!).y).toBe(6)
  })

  it('fails a batch past its time limit with BATCH_TIMEOUT and replaces the thread (setup again), not ready meanwhile', async () => {
    const { r, events } = await threaded()
    const [first] = await r.runBatch(payloads(r, [{ x: 1 }]))
    const before = json(first!).thread
    for (const stuck of [
      { x: 1, hang: true },
      { x: 1, spin: true },
    ]) {
      const t0 = Date.now()
      await expect(r.runBatch(payloads(r, [stuck]), undefined, { timeoutMs: 300 })).rejects.toMatchObject({ code: 'BATCH_TIMEOUT' })
      expect(Date.now() - t0).toBeLessThan(10_000)
      expect(r.meta().ready).toBe(false)
      await until(() => r.meta().ready)
    }
    expect(events.restarting).toEqual(['batch_timeout', 'batch_timeout'])
    expect(events.restarted).toEqual(['batch_timeout', 'batch_timeout'])
    const [after] = await r.runBatch(payloads(r, [{ x: 5 }]), undefined, { timeoutMs: 10_000 })
    expect(json(after!)).toMatchObject({ y: 10, setups: 1 })
    expect(json(after!).thread).not.toBe(before)
  })

  it('restarts a thread that died and serves again', async () => {
    const { r, events } = await threaded()
    await expect(r.runBatch(payloads(r, [{ x: 1, exit: true }]))).rejects.toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/exited with code 3/) })
    await until(() => r.meta().ready && events.restarted.length === 1)
    expect(events.restarting).toEqual(['died'])
    const [after] = await r.runBatch(payloads(r, [{ x: 4 }]))
    expect(json(after!).y).toBe(8)
  })
})

describe('PredictorRunner in the calling thread', () => {
  it('checks the output schema per item and replaces a predictor whose batch never settles', async () => {
    let setups = 0
    let teardowns = 0
    const p = definePredictor({
      name: 'inline',
      input: Type.Object({ x: Type.Number(), hang: Type.Boolean({ default: false }) }),
      output: Type.Object({ y: Type.Number() }),
      setup: () => {
        setups++
      },
      teardown: () => {
        teardowns++
      },
      predict: async (xs) => {
        if (xs.some((i) => i.hang)) {
          await new Promise(() => undefined)
        }
        return xs.map((i) => (i.x < 0 ? { y: 'negative' } : { y: i.x }))
      },
    })
    const r = new PredictorRunner(p)
    runners.push(r)
    await r.start()
    const req = (items: unknown[]): unknown[] => r.prepare({ v: 1, id: 'i', model: 'inline', deadline: Date.now() + 60_000, items }).map((i) => i.payload)
    const out = await r.runBatch(req([{ x: 1 }, { x: -1 }]))
    expect(out[0]).toEqual({ json: { y: 1 } })
    expect(out[1]).toMatchObject({ error: { code: 'PREDICTOR_FAILED' } })
    await expect(r.runBatch(req([{ x: 1, hang: true }]), undefined, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'BATCH_TIMEOUT' })
    await until(() => r.meta().ready)
    expect(teardowns).toBe(1)
    expect(setups).toBe(2)
    expect(await r.runBatch(req([{ x: 3 }]))).toEqual([{ json: { y: 3 } }])
  })
})
