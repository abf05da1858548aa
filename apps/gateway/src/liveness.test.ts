// Worker-loss detection (liveness.ts): the detector alone on a fake clock, then the gateway app with
// real CohortWorkers over an InProcessTransport, where a "dead" worker is one that accepted the request
// and then stops heartbeating and never replies.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeRequest, encodeAccept, encodeHeartbeat, encodeReply, subjects, type InferRequest } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { settledWithin } from '@cohort/test-support'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'
import { WorkerLiveness } from './liveness.ts'

const subj = subjects()
const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) {
    await c()
  }
})

function detector(o: { missedHeartbeats?: number; acceptTimeoutMs?: number } = {}) {
  const transport = new InProcessTransport()
  let now = 1_000_000
  const lv = new WorkerLiveness(transport, subj, 'g1', { ...o, now: () => now, checkIntervalMs: 1_000_000 })
  cleanups.push(
    () => lv.close(),
    () => transport.close(),
  )
  /** Advance the clock in 100 ms steps, checking after each (as the timer would). */
  const advance = (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      now += 100
      lv.check()
    }
  }
  return { lv, advance, transport }
}

describe('WorkerLiveness', () => {
  it('keeps a request while its worker heartbeats, and loses it after the missed heartbeats', () => {
    const { lv, advance } = detector()
    lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    const t = lv.track('r1')
    lv.accepted({ id: 'r1', worker: 'w1' })
    expect(t.worker).toBe('w1')
    for (let i = 0; i < 10; i++) {
      advance(1000)
      lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    }
    expect(t.lost).toBeUndefined()
    expect(t.signal.aborted).toBe(false)
    advance(2900)
    expect(t.lost).toBeUndefined()
    advance(300)
    expect(t.lost).toMatch(/worker w1 sent no heartbeat/)
    expect(t.signal.aborted).toBe(true)
    expect(lv.inFlight).toBe(0)
  })

  it("uses each worker's own interval and missedHeartbeats", () => {
    const { lv, advance } = detector({ missedHeartbeats: 2 })
    lv.heartbeat({ id: 'slow', intervalMs: 5000 })
    lv.heartbeat({ id: 'fast', intervalMs: 200 })
    const a = lv.track('a')
    const b = lv.track('b')
    lv.accepted({ id: 'a', worker: 'slow' })
    lv.accepted({ id: 'b', worker: 'fast' })
    advance(500)
    expect(b.lost).toBeDefined()
    expect(a.lost).toBeUndefined()
    advance(9400)
    expect(a.lost).toBeUndefined()
    advance(200)
    expect(a.lost).toBeDefined()
  })

  it('does not fail released requests, or anything on a drained worker (bye)', () => {
    const { lv, advance } = detector()
    lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    const t = lv.track('r1')
    lv.accepted({ id: 'r1', worker: 'w1' })
    t.release()
    t.release()
    lv.heartbeat({ id: 'w1', intervalMs: 1000, bye: true })
    advance(10_000)
    expect(t.lost).toBeUndefined()
    expect(lv.lostCount).toBe(0)
  })

  it('loses a request nobody accepted, but only once accepting workers were seen', () => {
    const { lv, advance } = detector({ acceptTimeoutMs: 2000 })
    const before = lv.track('old-protocol')
    advance(5000)
    expect(before.lost).toBeUndefined() // no heartbeat ever: workers that do not accept
    before.release()
    lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    const t = lv.track('r1')
    advance(1900)
    expect(t.lost).toBeUndefined()
    lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    advance(200)
    expect(t.lost).toMatch(/no worker accepted/)
    expect(t.unaccepted).toBe(true) // safe to resend: it never reached a worker
  })

  it('judges nobody when its own checks stalled (a blocked event loop)', () => {
    let now = 0
    const transport = new InProcessTransport()
    const lv = new WorkerLiveness(transport, subj, 'g1', { now: () => now, checkIntervalMs: 1_000_000 })
    cleanups.push(
      () => lv.close(),
      () => transport.close(),
    )
    lv.heartbeat({ id: 'w1', intervalMs: 1000 })
    const t = lv.track('r1')
    lv.accepted({ id: 'r1', worker: 'w1' })
    now += 10_000 // no check ran for 10 s
    lv.check()
    expect(t.lost).toBeUndefined()
    now += 3500
    lv.check()
    expect(t.lost).toBeUndefined() // 3.5 s since the last check is a stall too
    for (let i = 0; i < 40; i++) {
      now += 100
      lv.check()
    }
    expect(t.lost).toBeDefined()
  })

  it("does not count the time its own check ran late as a worker's silence (a gateway paused for longer than a 250 ms worker's loss window)", () => {
    let now = 0
    const transport = new InProcessTransport()
    const lv = new WorkerLiveness(transport, subj, 'g1', { now: () => now, checkIntervalMs: 250 })
    cleanups.push(
      () => lv.close(),
      () => transport.close(),
    )
    lv.heartbeat({ id: 'w1', intervalMs: 250 })
    const t = lv.track('r1')
    lv.accepted({ id: 'r1', worker: 'w1' })
    now += 250
    lv.check()
    now += 1450 // the next check comes 1.2 s late: the gateway was paused; w1's heartbeats sit unread
    lv.check()
    expect(t.lost).toBeUndefined()
    lv.heartbeat({ id: 'w1', intervalMs: 250 }) // read once the gateway runs again
    for (let i = 0; i < 3; i++) {
      now += 250
      lv.check()
      lv.heartbeat({ id: 'w1', intervalMs: 250 })
    }
    expect(t.lost).toBeUndefined()
    // A worker that really went silent is lost after its window of checks on time.
    for (let i = 0; i < 4; i++) {
      now += 250
      lv.check()
    }
    expect(t.lost).toMatch(/worker w1 sent no heartbeat for 1000 ms/)
  })

  it('follows notices from the transport; a client abort aborts without "lost"', async () => {
    const { lv, transport } = detector()
    transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w9', intervalMs: 1000 }))
    const ctl = new AbortController()
    const t = lv.track('r9', ctl.signal)
    transport.publish(lv.ackSubject, encodeAccept({ v: 1, id: 'r9', worker: 'w9' }))
    transport.publish(lv.ackSubject, new Uint8Array([1, 2, 3])) // garbage is ignored
    await new Promise((r) => setTimeout(r, 10))
    expect(t.worker).toBe('w9')
    ctl.abort()
    expect(t.signal.aborted).toBe(true)
    expect(t.lost).toBeUndefined()
    t.release()
  })

  it('validates its options', () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    expect(() => new WorkerLiveness(transport, subj, 'g', { missedHeartbeats: 0 })).toThrow(RangeError)
    expect(() => new WorkerLiveness(transport, subj, 'g', { maxRetries: -1 })).toThrow(RangeError)
  })
})

const double = definePredictor({
  name: 'double',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  predict: (xs) => xs.map((i) => ({ y: 2 * i.x })),
})

/**
 * A worker that accepts every request of `model`, heartbeats, and never replies; `die()` stops its
 * heartbeats (as `kill -9` would), `reply()` answers what it holds.
 */
function zombie(t: InProcessTransport, model: string) {
  const held: { req: InferRequest; respond: (d: Uint8Array) => boolean }[] = []
  const sub = t.subscribe(subj.infer(model), { queue: subj.queue(model) })
  const beat = () => t.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'zombie', intervalMs: 100 }))
  beat()
  let timer: ReturnType<typeof setInterval> | undefined = setInterval(beat, 100)
  void (async () => {
    for await (const m of sub) {
      const req = decodeRequest(m.data)
      held.push({ req, respond: (d) => m.respond(d) })
      if (req.ack) {
        t.publish(req.ack, encodeAccept({ v: 1, id: req.id, worker: 'zombie' }))
      }
    }
  })()
  const die = () => {
    clearInterval(timer)
    timer = undefined
    sub.unsubscribe()
  }
  cleanups.push(die)
  return { held, die }
}

async function gatewayWith(opts: { workers: number; workerLoss?: false }) {
  const transport = new InProcessTransport()
  const z = zombie(transport, 'double')
  const workers: CohortWorker[] = []
  for (let i = 0; i < opts.workers; i++) {
    const w = new CohortWorker({ transport, runners: [new PredictorRunner(double)], id: `live-${i}`, heartbeatMs: 100 })
    await w.start()
    workers.push(w)
  }
  const app = createApp({ transport, workerLoss: opts.workerLoss ?? { checkIntervalMs: 20 } })
  cleanups.push(async () => {
    for (const w of workers) await w.drain()
    await transport.close()
  })
  return { app, z, transport }
}

/** OIP infer of {x} (one FP64 item); the reply's y is read by {@link yOf}. */
const infer = (app: ReturnType<typeof createApp>, x: number, headers: Record<string, string> = {}) =>
  app.request('/v2/models/double/infer', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '20000', ...headers },
    body: JSON.stringify({ inputs: [{ name: 'x', shape: [1], datatype: 'FP64', data: [x] }] }),
  })

async function yOf(res: Response): Promise<number> {
  const body = (await res.json()) as { outputs: { name: string; data: number[] }[] }
  return body.outputs.find((o) => o.name === 'y')!.data[0]!
}

describe('gateway: a worker lost while holding a request', () => {
  it('answers 503 WORKER_LOST with Retry-After once its heartbeats stop, not at the deadline', async () => {
    const { app, z } = await gatewayWith({ workers: 0 })
    // A 10 min deadline: an answer within the test's timeout cannot be the deadline's (and a
    // deadline would answer 504 DEADLINE_EXCEEDED, not WORKER_LOST).
    const pending = Promise.resolve(infer(app, 1, { 'x-cohort-timeout-ms': '600000' }))
    while (z.held.length === 0) await new Promise((r) => setTimeout(r, 5))
    expect(await settledWithin(pending, 300)).toBe('pending') // held while the zombie heartbeats
    z.die()
    const res = await pending
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('1')
    const body = (await res.json()) as { code: string; error: string }
    expect(body.code).toBe('WORKER_LOST')
    expect(body.error).toMatch(/zombie.*Idempotency-Key/)
  })

  it('resends a request marked safe to retry to another worker, which answers it', async () => {
    const { app, z } = await gatewayWith({ workers: 1 })
    // The in-process queue group alternates: the zombie gets one of the first two requests.
    const a = infer(app, 5, { 'idempotency-key': 'k5' })
    const b = infer(app, 6, { 'idempotency-key': 'k6' })
    while (z.held.length === 0) await new Promise((r) => setTimeout(r, 5))
    z.die()
    const [ra, rb] = await Promise.all([a, b])
    expect([ra.status, await ra.clone().text()]).toEqual([200, expect.any(String)])
    expect(rb.status).toBe(200)
    expect(await yOf(ra)).toBe(10)
    expect(await yOf(rb)).toBe(12)
    // The late reply of the lost attempt reaches nobody (its request is gone).
    const held = z.held[0]!
    expect(held.respond(encodeReply({ v: 1, id: held.req.id, items: [{ y: -1 }] }))).toBe(false)
  })

  it('resends a request no worker accepted (dropped on the way) even without an Idempotency-Key', async () => {
    const transport = new InProcessTransport()
    // A black hole in the queue group: it heartbeats but swallows requests without accepting them,
    // like a NATS server that drops a message routed to a worker that just left the group.
    const hole = transport.subscribe(subj.infer('double'), { queue: subj.queue('double') })
    const swallowed: string[] = []
    void (async () => {
      for await (const m of hole) {
        swallowed.push(decodeRequest(m.data).id)
        hole.unsubscribe() // gone after the first: the resend must reach the live worker
      }
    })()
    const w = new CohortWorker({ transport, runners: [new PredictorRunner(double)], id: 'live', heartbeatMs: 100 })
    await w.start()
    const app = createApp({ transport, workerLoss: { checkIntervalMs: 20, acceptTimeoutMs: 300 } })
    cleanups.push(async () => {
      await w.drain()
      await transport.close()
    })
    const res = await Promise.all([infer(app, 3), infer(app, 4)])
    expect(swallowed).toHaveLength(1)
    expect(res.map((r) => r.status)).toEqual([200, 200])
    expect([await yOf(res[0]), await yOf(res[1])]).toEqual([6, 8])
  })

  it('with workerLoss: false, waits for the deadline instead (504)', async () => {
    const { app, z } = await gatewayWith({ workers: 0, workerLoss: false })
    const t0 = Date.now()
    const pending = infer(app, 1, { 'x-cohort-timeout-ms': '1500' })
    while (z.held.length === 0) await new Promise((r) => setTimeout(r, 5))
    z.die()
    const res = await pending
    expect(res.status).toBe(504)
    expect(((await res.json()) as { code: string }).code).toBe('DEADLINE_EXCEEDED')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400)
    expect(z.held[0]!.req.ack).toBeUndefined()
  })
})
