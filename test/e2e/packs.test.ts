// Protocol v2 packs over real NATS (docs/protocol.md#protocol-v2): every per-request guarantee holds
// for a request inside a packed message: its own errors, cancellation, deadline, and the loss of
// the worker that holds the pack (retry or WORKER_LOST); and packs still spread over workers with room.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createGatewayCore, type Upstream } from '@cohort/gateway'
import { CohortError, subjects, type InferReply } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const S = subjects()
type Sleepy = { y: number; batch: number }

let nats: NatsServerHandle
const conns: NatsConnection[] = []

async function transport(): Promise<Transport> {
  const nc = await connect({ servers: nats.url })
  conns.push(nc)
  return createNatsTransport(nc)
}

/** A gateway's upstream with worker-loss detection; resolves once a v2 worker's heartbeat arrived. */
async function gateway(o: { missedHeartbeats?: number; acceptTimeoutMs?: number } = {}): Promise<Upstream> {
  const t = await transport()
  const { upstream: up, liveness } = createGatewayCore({ transport: t, metaTimeoutMs: 2000, workerLoss: { checkIntervalMs: 50, ...o } })
  const lv = liveness!
  const until = Date.now() + 30_000
  while (lv.protocol < 2 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50))
  }
  expect(lv.protocol).toBe(2)
  return up
}

function req(x: Record<string, unknown>, deadlineMs = 10_000) {
  return { v: 1 as const, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + deadlineMs, items: [x] }
}

/** Settle a request: its first item or its error code. */
async function outcome(p: Promise<InferReply>): Promise<{ item?: Sleepy; itemError?: string; code?: string }> {
  try {
    const r = await p
    const e = r.errors?.[0]
    return e ? { itemError: e.code } : { item: r.items?.[0] as Sleepy }
  } catch (e) {
    return { code: e instanceof CohortError ? e.code : String(e) }
  }
}

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
})

afterAll(async () => {
  await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  await nats.stop()
})

describe('packs over real NATS, one in-process worker', () => {
  let worker: CohortWorker
  let up: Upstream
  beforeAll(async () => {
    process.env['SLEEPY_MS'] = '20'
    const mod = (await import(SLEEPY_PREDICTOR)) as { default: ConstructorParameters<typeof PredictorRunner>[0] }
    worker = new CohortWorker({ transport: await transport(), runners: [new PredictorRunner(mod.default)], id: 'pw-1' })
    await worker.start()
    up = await gateway()
  }, 60_000)
  afterAll(async () => {
    await worker?.close()
  })

  it('answers each request of one pack on its own: a failing item and a bad input hurt only their request', async () => {
    const sent = { ...up.packer!.sent }
    const ps = [req({ x: 1 }), req({ x: 2, fail: true }), req({ x: 'not a number' }), req({ x: 4 })].map((r) => up.infer(r, 10_000, undefined))
    const out = await Promise.all(ps.map(outcome))
    // The four left in one message.
    expect(up.packer!.sent.packs - sent.packs).toBe(1)
    expect(up.packer!.sent.requests - sent.requests).toBe(4)
    expect(out[0]?.item?.y).toBe(2)
    expect(out[1]?.itemError).toBe('PREDICTOR_FAILED')
    expect(out[2]?.code ?? out[2]?.itemError).toMatch(/INVALID_INPUT|BAD_REQUEST/)
    expect(out[3]?.item?.y).toBe(8)
  })

  it('a request cancelled inside a queued pack does not run; the rest of the pack does', async () => {
    const blocker = up.infer(req({ x: 0, sleepMs: 600 }), 10_000, undefined)
    await new Promise((r) => setTimeout(r, 100)) // the blocker runs alone; the pack queues behind it
    const ctl = new AbortController()
    const sent = up.packer!.sent.packs
    const ps = [up.infer(req({ x: 1 }), 10_000, undefined), up.infer(req({ x: 2 }), 10_000, ctl.signal), up.infer(req({ x: 3 }), 10_000, undefined)]
    expect(up.packer!.sent.packs).toBe(sent) // not sent before the turn ends
    await new Promise((r) => setTimeout(r, 100))
    expect(up.packer!.sent.packs).toBe(sent + 1)
    ctl.abort()
    const out = await Promise.all(ps.map(outcome))
    await blocker
    expect(out[1]?.code).toBe('CANCELLED')
    // The two others ran together, without the cancelled one.
    expect(out[0]?.item).toEqual({ y: 2, batch: 2 })
    expect(out[2]?.item).toEqual({ y: 6, batch: 2 })
  })

  it('a request of a pack whose deadline passes while queued answers DEADLINE_EXCEEDED; the rest runs', async () => {
    const blocker = up.infer(req({ x: 0, sleepMs: 800 }), 10_000, undefined)
    await new Promise((r) => setTimeout(r, 100))
    const ps = [up.infer(req({ x: 1 }), 10_000, undefined), up.infer(req({ x: 2 }, 200), 10_000, undefined), up.infer(req({ x: 3 }), 10_000, undefined)]
    const out = await Promise.all(ps.map(outcome))
    await blocker
    expect(out[1]?.itemError ?? out[1]?.code).toBe('DEADLINE_EXCEEDED')
    expect(out[0]?.item).toEqual({ y: 2, batch: 2 })
    expect(out[2]?.item).toEqual({ y: 6, batch: 2 })
  })

  it('the gateway times out one request of a pack (its own timeoutMs) while the others are answered', async () => {
    const blocker = up.infer(req({ x: 0, sleepMs: 600 }), 10_000, undefined)
    await new Promise((r) => setTimeout(r, 100))
    const ps = [up.infer(req({ x: 1 }), 10_000, undefined), up.infer(req({ x: 2 }), 150, undefined)]
    const out = await Promise.all(ps.map(outcome))
    await blocker
    expect(out[1]?.code).toBe('DEADLINE_EXCEEDED')
    expect(out[0]?.item?.y).toBe(2)
  })
})

describe('packs over real NATS, worker processes', () => {
  const procs: CliProcess[] = []
  const startWorker = async (id: string, env: Record<string, string>, extra: string[] = []) => {
    const w = spawnCohort(['worker', '--nats', nats.url, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--heartbeat-ms', '200', ...extra], env)
    procs.push(w)
    await w.waitFor(/serving/, 60_000)
    return w
  }
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  })

  it('when the worker holding a pack dies, its retryable requests run on another worker and the others fail WORKER_LOST', async () => {
    const a = await startWorker('pk-a', { SLEEPY_MS: '40000' })
    // A late acceptance (a busy machine) must not count as a loss here: only A's death may.
    const up = await gateway({ missedHeartbeats: 3, acceptTimeoutMs: 30_000 })
    const sent = up.packer!.sent.packs
    const ps = [
      up.infer(req({ x: 1 }, 60_000), 60_000, undefined, { retryable: true }),
      up.infer(req({ x: 2 }, 60_000), 60_000, undefined, { retryable: false }),
      up.infer(req({ x: 3 }, 60_000), 60_000, undefined, { retryable: true }),
    ].map(outcome)
    await new Promise((r) => setTimeout(r, 300))
    expect(up.packer!.sent.packs).toBe(sent + 1)
    // A holds the pack (its batch sleeps 40 s, longer than B takes to start on a busy machine); B
    // starts, then A dies.
    await startWorker('pk-b', { SLEEPY_MS: '20' })
    await a.stop('SIGKILL')
    const out = await Promise.all(ps)
    expect(out[0]?.item?.y).toBe(2)
    expect(out[1]?.code, JSON.stringify(out)).toBe('WORKER_LOST')
    expect(out[2]?.item?.y).toBe(6)
  }, 120_000)

  it('packs still spread over workers with room: a full worker stops taking packs', async () => {
    for (const p of procs.splice(0)) {
      await p.stop('SIGKILL')
    }
    // Batches of 4 that sleep 1.5 s: a worker stops listening on the main subject at 8 queued items.
    await startWorker('sp-a', { SLEEPY_MS: '1500' }, ['--max-batch-size', '4'])
    await startWorker('sp-b', { SLEEPY_MS: '1500' }, ['--max-batch-size', '4'])
    const up = await gateway()
    const all: Promise<InferReply>[] = []
    for (let turn = 0; turn < 6; turn++) {
      for (let i = 0; i < 4; i++) {
        all.push(up.infer(req({ x: i }, 60_000), 60_000, undefined))
      }
      await new Promise((r) => setTimeout(r, 150))
    }
    const replies = await Promise.all(all)
    const by: Record<string, number> = {}
    for (const r of replies) {
      by[r.worker ?? '?'] = (by[r.worker ?? '?'] ?? 0) + 1
    }
    // One worker holds at most 4 running + 8 queued (+ one pack in flight) of the 24 before it
    // pauses; packs routed at random, ignoring room, would put 5 or 6 of the 6 packs on one worker
    // about one run in five.
    expect(by['sp-a'] ?? 0).toBeLessThanOrEqual(16)
    expect(by['sp-b'] ?? 0).toBeLessThanOrEqual(16)
    expect((by['sp-a'] ?? 0) + (by['sp-b'] ?? 0)).toBe(24)
  }, 90_000)
})
