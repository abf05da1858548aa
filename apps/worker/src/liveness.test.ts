// The worker's side of worker-loss detection (docs/architecture.md#worker-loss), over the in-process
// transport: heartbeats from start to drain (the last one `bye`), and an acceptance notice for every
// request that asks for one, sent on receipt, before the request runs.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { decodeAccept, decodeHeartbeat, decodeReply, encodeRequest, subjects, type AcceptNotice, type Heartbeat } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { settledWithin } from '@cohort/test-support'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker } from './worker.ts'
import { PredictorRunner } from './runners/predictor-runner.ts'

const subj = subjects()
const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

let release: () => void = () => undefined
const slow = definePredictor({
  name: 'slow',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  async predict(xs) {
    await new Promise<void>((r) => (release = r))
    return xs.map((i) => ({ y: 2 * i.x }))
  },
})

function collect<T>(t: InProcessTransport, subject: string, decode: (b: Uint8Array) => T): { seen: T[]; at: number[] } {
  const out = { seen: [] as T[], at: [] as number[] }
  const sub = t.subscribe(subject)
  void (async () => {
    for await (const m of sub) {
      out.seen.push(decode(m.data))
      out.at.push(Date.now())
    }
  })()
  return out
}

describe('worker heartbeats and acceptance notices', () => {
  it('heartbeats at start and every heartbeatMs until drained, the last one with bye', async () => {
    // The heartbeat's interval timer on a fake clock: each beat is one advance of heartbeatMs.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
    cleanups.push(() => {
      vi.useRealTimers()
      return Promise.resolve()
    })
    const t = new InProcessTransport()
    const beats = collect<Heartbeat>(t, subj.heartbeat(), decodeHeartbeat)
    const w = new CohortWorker({ transport: t, runners: [new PredictorRunner(slow)], id: 'hb-1', heartbeatMs: 50 })
    cleanups.push(() => t.close())
    /** Let the in-process transport deliver what was published (real turns, not the fake clock). */
    const delivered = async () => {
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r))
    }
    await w.start()
    await delivered()
    expect(beats.seen).toEqual([{ v: 1, id: 'hb-1', intervalMs: 50, proto: 2 }]) // the first one at start
    vi.advanceTimersByTime(49)
    await delivered()
    expect(beats.seen).toHaveLength(1) // not before heartbeatMs
    for (let k = 1; k <= 8; k++) {
      vi.advanceTimersByTime(k === 1 ? 1 : 50)
      await delivered()
      expect(beats.seen).toHaveLength(1 + k) // one per heartbeatMs
    }
    expect(beats.seen.every((b) => b.bye === undefined && b.intervalMs === 50)).toBe(true)
    await w.drain()
    await delivered()
    expect(beats.seen.at(-1)).toEqual({ v: 1, id: 'hb-1', intervalMs: 50, proto: 2, bye: true })
    vi.advanceTimersByTime(500)
    await delivered()
    expect(beats.seen).toHaveLength(10) // nothing after bye
  })

  it('sends no heartbeat with heartbeatMs 0', async () => {
    const t = new InProcessTransport()
    const beats = collect<Heartbeat>(t, subj.heartbeat(), decodeHeartbeat)
    const w = new CohortWorker({ transport: t, runners: [new PredictorRunner(slow)], heartbeatMs: 0 })
    cleanups.push(async () => {
      await w.drain()
      await t.close()
    })
    await w.start()
    await new Promise((r) => setTimeout(r, 50))
    expect(beats.seen).toEqual([])
  })

  it('accepts a request on its ack subject as soon as it arrives, before it runs; none without ack', async () => {
    const t = new InProcessTransport()
    const acks = collect<AcceptNotice>(t, 'cohort.accept.g-test', decodeAccept)
    const w = new CohortWorker({ transport: t, runners: [new PredictorRunner(slow)], id: 'acc-1', heartbeatMs: 0 })
    cleanups.push(async () => {
      release()
      await w.drain()
      await t.close()
    })
    await w.start()
    const req = { v: 1 as const, id: 'r1', model: 'slow', deadline: Date.now() + 10_000, items: [{ x: 4 }], ack: 'cohort.accept.g-test' }
    const reply = t.request(subj.infer('slow'), encodeRequest(req), { timeoutMs: 10_000 })
    while (acks.seen.length === 0) await new Promise((r) => setTimeout(r, 5))
    expect(acks.seen).toEqual([{ v: 1, id: 'r1', worker: 'acc-1' }])
    expect(await settledWithin(reply, 20)).toBe('pending') // the batch is still running: held until release()
    release()
    expect(decodeReply(await reply).items).toEqual([{ y: 8 }])
    const plain = { v: req.v, id: 'r2', model: req.model, deadline: req.deadline, items: req.items } // no ack subject
    const second = t.request(subj.infer('slow'), encodeRequest(plain), { timeoutMs: 10_000 })
    // Release r2's batch once it runs (it was received, so any ack would have been sent first).
    while ((await settledWithin(second, 5)) === 'pending') release()
    expect(acks.seen.map((a) => a.id)).toEqual(['r1']) // an ack is sent on receipt, before the run: none came for r2
  })
})
