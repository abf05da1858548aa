// The worker's side of worker-loss detection (docs/architecture.md#worker-loss), over the in-process
// transport: heartbeats from start to drain (the last one `bye`), and an acceptance notice for every
// request that asks for one, sent on receipt, before the request runs.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeAccept, decodeHeartbeat, decodeReply, encodeRequest, subjects, type AcceptNotice, type Heartbeat } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
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
    const t = new InProcessTransport()
    const beats = collect<Heartbeat>(t, subj.heartbeat(), decodeHeartbeat)
    const w = new CohortWorker({ transport: t, runners: [new PredictorRunner(slow)], id: 'hb-1', heartbeatMs: 50 })
    cleanups.push(() => t.close())
    await w.start()
    await new Promise((r) => setTimeout(r, 1))
    expect(beats.seen[0]).toEqual({ v: 1, id: 'hb-1', intervalMs: 50, proto: 2 }) // the first one at start
    await new Promise((r) => setTimeout(r, 400))
    const n = beats.seen.length
    expect(n).toBeGreaterThanOrEqual(4) // ~9 in 450 ms; timers run late on a busy machine
    expect(beats.seen.every((b) => b.bye === undefined)).toBe(true)
    await w.drain()
    await new Promise((r) => setTimeout(r, 150))
    expect(beats.seen.at(-1)).toEqual({ v: 1, id: 'hb-1', intervalMs: 50, proto: 2, bye: true })
    expect(beats.seen.length).toBe(n + 1) // nothing after bye
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
    await new Promise((r) => setTimeout(r, 30))
    expect(acks.seen).toEqual([{ v: 1, id: 'r1', worker: 'acc-1' }]) // the batch is still running
    release()
    expect(decodeReply(await reply).items).toEqual([{ y: 8 }])
    const { ack: _, ...plain } = { ...req, id: 'r2' }
    const second = t.request(subj.infer('slow'), encodeRequest(plain), { timeoutMs: 10_000 })
    await new Promise((r) => setTimeout(r, 30))
    release()
    await second
    expect(acks.seen.map((a) => a.id)).toEqual(['r1'])
  })
})
