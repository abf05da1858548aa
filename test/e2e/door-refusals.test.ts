// Refusals at the door over a real nats-server (docs/batching.md#admission-at-the-door): a
// `cohort worker` child process serves the sleep-based `sleepy` predictor (50 ms per batch of up
// to 4: about 80 items/s, not CPU-bound); an in-process gateway learns the worker's queue-wait
// estimates from its heartbeats and v2 accept notices. Flooded far past capacity with 300 ms
// deadlines, the gateway refuses at its door (503 OVERLOADED, Retry-After, the worker-wait check)
// requests that then never reach NATS: a spy subscribed to every subject under the prefix
// (`cohort.>`) keeps every message, decodable or not, and the door-refused request ids appear in
// none of them (searched in the raw bytes), while the admitted ones appear (the same search). After the flood, a quiet
// period lets the same requests through again (no lockout). No latency or rate is asserted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { decodeInferMessage } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import type { Hono } from 'hono'

let nats: NatsServerHandle
let nc: NatsConnection
let spy: NatsConnection
let gt: Transport
let worker: CliProcess
let app: Hono
const registry = new Registry()
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }
const PREFIX = 'cohort'
/** Every message on `cohort.>` (requests, packs, cancels, meta, anything), kept raw. */
const seen: { subject: string; data: Uint8Array }[] = []
/** Of those, the ones the protocol decodes as a request or a pack (for the message below). */
let decoded = 0
/** True when `id` occurs in any message seen: its subject or its bytes (UTF-8), decodable or not. */
function published(id: string): boolean {
  const needle = Buffer.from(id, 'utf8')
  return seen.some((m) => m.subject.includes(id) || Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength).includes(needle))
}
/** Every message the gateway published before now has reached the spy: both connections flushed. */
async function settled(): Promise<void> {
  await nc.flush() // the gateway's publishes are at the server
  await spy.flush() // and the server's deliveries to the spy have arrived (PONG after them)
}

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'door', '--threads', '1', '--max-batch-size', '4', '--predictor', SLEEPY_PREDICTOR], { SLEEPY_MS: '50' })
  await worker.waitFor(/worker door serving sleepy/, 60_000)
  spy = await connect({ servers: nats.url })
  const sub = spy.subscribe(`${PREFIX}.>`)
  void (async () => {
    for await (const m of sub) {
      seen.push({ subject: m.subject, data: m.data })
      try {
        decodeInferMessage(m.data)
        decoded++
      } catch {
        // kept all the same: a door-refused id must not be in it either
      }
    }
  })()
  await spy.flush()
  nc = await connect({ servers: nats.url })
  gt = createNatsTransport(nc)
  const gw = createApp({ transport: gt, registry, metaTimeoutMs: 2_000, logger: quiet, subjectPrefix: PREFIX })
  // Every subject the gateway publishes on is under the spy's `cohort.>`.
  expect(gw.core.subjects.infer('sleepy').startsWith(`${PREFIX}.`)).toBe(true)
  app = gw
}, 90_000)

afterAll(async () => {
  await ifStarted(worker)?.stop('SIGTERM', 10_000)
  await ifStarted(gt)?.close()
  await ifStarted(nc)?.close()
  await ifStarted(spy)?.close()
  await ifStarted(nats)?.stop()
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Outcome {
  status: number
  id: string
  code: string
  message: string
  retryAfter: string | null
}

async function predict(x: number, timeoutMs: number): Promise<Outcome> {
  const r = await app.request('/models/sleepy/predictions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': String(timeoutMs) },
    body: JSON.stringify({ input: { x } }),
  })
  const body = (await r.json()) as { code?: string; error?: string }
  return { status: r.status, id: r.headers.get('x-request-id') ?? '', code: body.code ?? 'OK', message: body.error ?? '', retryAfter: r.headers.get('retry-after') }
}

/** `cohort_door_refusals_total` of the model for one door check. */
function doorRefusals(check: string): number {
  const line = registry
    .render()
    .split('\n')
    .find((l) => l.startsWith('cohort_door_refusals_total{') && l.includes('model="sleepy"') && l.includes(`check="${check}"`))
  return line ? Number(line.split(' ').pop()) : 0
}

const fromDoor = (o: Outcome) => o.status === 503 && /refused at the door \(worker-wait check\)/.test(o.message)

describe('refusals at the door (worker-wait check) over NATS', () => {
  it('refuses a flood past its deadlines at the door, publishing nothing for those requests, and admits again after a quiet period', async () => {
    // Warm the cost model so the worker judges arrivals and sends estimates (5 batches), and let
    // a heartbeat or two arrive (protocol v2: accept notices with the estimate).
    for (let i = 0; i < 6; i++) expect((await predict(i, 5_000)).status).toBe(200)
    await sleep(1_200)

    let flooding = true
    const outcomes: Outcome[] = []
    // 48 concurrent clients, each resending as soon as it is answered (after a short pause when
    // refused): far above the ~80 items/s the worker can do, with 300 ms deadlines.
    const flood = Array.from({ length: 48 }, async (_, k) => {
      for (let n = 0; flooding; n++) {
        const o = await predict(1000 + k * 10_000 + n, 300)
        outcomes.push(o)
        if (o.status !== 200) await sleep(10)
      }
    })
    // Flood until the door has refused a good number of requests (bounded: the test fails below if it never does).
    for (let t = 0; t < 300 && outcomes.filter(fromDoor).length < 50; t++) await sleep(50)
    flooding = false
    await Promise.all(flood)

    const door = outcomes.filter(fromDoor)
    expect(door.length).toBeGreaterThan(0)
    expect(doorRefusals('worker_wait')).toBe(door.length)
    for (const o of door) {
      expect(o.code).toBe('OVERLOADED')
      expect(Number(o.retryAfter)).toBeGreaterThanOrEqual(1)
      expect(o.id).not.toBe('')
    }
    // Requests that did pass the door were published (the spy sees the gateway's messages) ...
    const served = outcomes.filter((o) => o.status === 200)
    expect(served.length).toBeGreaterThan(0)
    await settled()
    expect(decoded).toBeGreaterThan(0)
    expect(served.filter((o) => !published(o.id))).toEqual([])
    // ... and not one door-refused request was, on any subject, in any form: no NATS round trip
    // for a door refusal.
    expect(
      door.filter((o) => published(o.id)),
      `${seen.length} messages seen, ${decoded} decoded`,
    ).toEqual([])

    // A quiet period: the worker's queue drains and the door's estimates age out or refresh.
    // Then the same requests (300 ms deadlines) are admitted and served again.
    let ok: Outcome | undefined
    for (let i = 0; i < 100 && ok === undefined; i++) {
      await sleep(200)
      const o = await predict(i, 300)
      if (o.status === 200) ok = o
    }
    expect(ok?.status).toBe(200)
    await settled()
    expect(published(ok!.id)).toBe(true)
  }, 90_000)
})
