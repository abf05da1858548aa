import { afterEach, describe, expect, it, vi } from 'vitest'
import { decodeReply, encodeRequest, subjects, type InferRequest } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import type { BatchingConfig } from '@cohort/batching'
import { CohortWorker } from './worker.ts'
import { PredictorRunner } from './runners/predictor-runner.ts'

const subj = subjects()

/** `echo`: y = x; every batch waits for `release()` while held. Records batch sizes. */
function echo() {
  const sizes: number[] = []
  let open: () => void = () => undefined
  let gate: Promise<void> = Promise.resolve()
  const predictor = definePredictor({
    name: 'echo',
    batch: { maxBatchSize: 64 },
    input: Type.Object({ x: Type.Number() }),
    output: Type.Object({ y: Type.Number() }),
    async predict(inputs) {
      sizes.push(inputs.length)
      await gate
      return inputs.map((i) => ({ y: i.x }))
    },
  })
  return {
    predictor,
    sizes,
    hold: () => {
      gate = new Promise((r) => (open = r))
    },
    release: () => open(),
  }
}

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

async function start(batching: Partial<BatchingConfig>) {
  const transport = new InProcessTransport()
  const e = echo()
  const worker = new CohortWorker({ transport, id: 'w-cap', runners: [new PredictorRunner(e.predictor)], batching })
  await worker.start()
  cleanups.push(async () => {
    e.release()
    await worker.drain()
    await transport.close()
  })
  return { transport, worker, server: worker.servers[0]!, ...e }
}

let seq = 0
function send(t: InProcessTransport, n: number) {
  const req: InferRequest = { v: 1, id: `c${++seq}`, model: 'echo', deadline: Date.now() + 10_000, items: Array.from({ length: n }, (_, x) => ({ x })) }
  return t.request(subj.infer('echo'), encodeRequest(req), { timeoutMs: 5_000 }).then(decodeReply)
}

describe('worker, self-tuned batch cap', () => {
  it('dispatches at most the tuned cap (32 at start), below the hard cap, and shows both', async () => {
    const w = await start({ autoBatchSize: true })
    expect(w.server.meta()).toMatchObject({ maxBatchSize: 64, batchCap: 32, autoBatchSize: true, batchTuning: { cap: 32, limit: 64, last: null } })
    const text = w.worker.registry.render()
    expect(text).toContain('cohort_batch_cap{model="echo"} 32')
    expect(text).toContain('cohort_batch_limit{model="echo"} 64')
    w.hold()
    const first = send(w.transport, 1)
    await vi.waitFor(() => expect(w.sizes).toEqual([1]))
    const many = send(w.transport, 100)
    await vi.waitFor(() => expect(w.server.engine.queued).toBe(100))
    w.release()
    const replies = await Promise.all([first, many])
    expect(replies[1].items).toHaveLength(100)
    expect(w.sizes.slice(1)).toEqual([32, 32, 32, 4])
  })

  it('counts and explains each change: a lower maxBatchSize clamps the cap (reason limit)', async () => {
    const w = await start({ autoBatchSize: true })
    w.server.applyConfig({ maxBatchSize: 16 })
    expect(w.server.engine.batchCap).toBe(16)
    expect(w.worker.registry.render()).toContain('cohort_batch_cap_changes_total{model="echo",reason="limit"} 1')
    expect(w.server.meta()).toMatchObject({ batchCap: 16, batchTuning: { last: { from: 32, to: 16, reason: 'limit' } } })
  })

  it('with autoBatchSize off, the cap is maxBatchSize', async () => {
    const w = await start({ autoBatchSize: false })
    expect(w.server.meta()).toMatchObject({ maxBatchSize: 64, batchCap: 64, autoBatchSize: false })
    expect(w.server.meta()).not.toHaveProperty('batchTuning')
  })
})
