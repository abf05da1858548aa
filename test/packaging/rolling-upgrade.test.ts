// Rolling upgrades (docs/deploy.md#rolling-upgrades, docs/protocol.md#version-negotiation-and-compatibility):
// during a deploy, gateways and workers of adjacent versions share the bus. The previous wire format
// is protocol v1 (one msgpack InferRequest per NATS request, heartbeats without `proto`); the current
// one adds v2 packs, sent only once every worker heard announces proto 2. Here, over a real
// nats-server: a v1 gateway (frozen bytes of a v1 request, not this repository's encoder) is served
// by a current worker; a current gateway facing a v1 worker (emulated on raw NATS: heartbeats
// without `proto`, refuses anything but v1) sends it v1, also with a current worker beside it; and
// a message of a future envelope version is refused with a clear BAD_REQUEST, not dropped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import { Upstream, WorkerLiveness } from '@cohort/gateway'
import { subjects } from '@cohort/protocol'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { SLEEPY_PREDICTOR, startNatsServer, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const S = subjects()
/** Plain msgpack maps, as the wire is specified (docs/protocol.md#encoding): an old peer's codec. */
const plain = new Packr({ useRecords: false })
/**
 * A v1 InferRequest as a 0.1.0 gateway before packs sent it, frozen as bytes: {v: 1, id:
 * "v1-fixture-1", model: "sleepy", deadline: 4102444800000 (2100-01-01), items: [{x: 21}]}, encoded
 * by hand (fixmaps, fixstrs, a float64 deadline), independent of msgpackr.
 */
const V1_REQUEST = Buffer.from('85a17601a26964ac76312d666978747572652d31a56d6f64656ca6736c65657079a8646561646c696e65cb428dd9661ec00000a56974656d739181a17815', 'hex')

let nats: NatsServerHandle
const conns: NatsConnection[] = []
let worker: CohortWorker

async function nc(): Promise<NatsConnection> {
  const c = await connect({ servers: nats.url })
  conns.push(c)
  return c
}

async function transport(): Promise<Transport> {
  return createNatsTransport(await nc())
}

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  process.env['SLEEPY_MS'] = '5'
  const mod = (await import(SLEEPY_PREDICTOR)) as { default: ConstructorParameters<typeof PredictorRunner>[0] }
  worker = new CohortWorker({ transport: await transport(), runners: [new PredictorRunner(mod.default)], id: 'current-1' })
  await worker.start()
}, 60_000)

afterAll(async () => {
  await ifStarted(worker)?.close()
  await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

describe('adjacent versions on one bus', () => {
  it('the frozen v1 request decodes as the wire spec says (the fixture is what it claims)', () => {
    expect(plain.unpack(V1_REQUEST)).toEqual({ v: 1, id: 'v1-fixture-1', model: 'sleepy', deadline: 4102444800000, items: [{ x: 21 }] })
  })

  it('a gateway of the previous wire format (v1 requests) is served by a current worker', async () => {
    const c = await nc()
    const reply = plain.unpack((await c.request(S.infer('sleepy'), V1_REQUEST, { timeout: 10_000 })).data) as Record<string, unknown>
    expect(reply).toMatchObject({ v: 1, id: 'v1-fixture-1', worker: 'current-1' })
    expect(reply['error']).toBeUndefined()
    expect((reply['items'] as { y: number }[])[0]?.y).toBe(42)
  })

  it('a current gateway sends v1 to a worker of the previous version (no proto in its heartbeats), also beside a current worker', async () => {
    // The old worker: heartbeats without `proto`, answers v1 requests on its model's subject, and
    // answers anything else with an error a v1 worker would give (it would not know the format).
    const old = await nc()
    const seen: number[] = []
    const sub = old.subscribe(S.infer('legacy'), { queue: 'legacy' })
    void (async () => {
      for await (const m of sub) {
        const r = plain.unpack(m.data) as { v: number; id?: string; items?: { x: number }[] }
        seen.push(r.v)
        m.respond(
          r.v === 1
            ? plain.pack({ v: 1, id: r.id, items: (r.items ?? []).map((i) => ({ y: i.x + 1 })), worker: 'old-1' })
            : plain.pack({ v: 1, id: r.id ?? '', error: { code: 'BAD_REQUEST', message: `request.v must be 1, got ${r.v}` } }),
        )
      }
    })()
    const beat = setInterval(() => old.publish(S.heartbeat(), plain.pack({ v: 1, id: 'old-1', intervalMs: 100 })), 100)
    try {
      const lv = new WorkerLiveness(await transport(), S, 'g-rolling', { checkIntervalMs: 50 })
      const up = new Upstream(await transport(), S, 2000, lv)
      // Both workers heard from (their heartbeats seen on the bus, then one more interval for the
      // gateway's): the current one announces proto 2, the old one nothing (1).
      const heard = new Set<string>()
      const hb = (await nc()).subscribe(S.heartbeat())
      for await (const m of hb) {
        heard.add((plain.unpack(m.data) as { id: string }).id)
        if (heard.has('old-1') && heard.has('current-1')) {
          break
        }
      }
      await new Promise((r) => setTimeout(r, 300))
      expect(lv.protocol).toBe(1)
      const rs = await Promise.all(
        [1, 2, 3].map((x) => up.infer({ v: 1, id: crypto.randomUUID(), model: 'legacy', deadline: Date.now() + 10_000, items: [{ x }] }, 10_000, undefined)),
      )
      expect(rs.map((r) => (r.items?.[0] as { y: number }).y)).toEqual([2, 3, 4])
      expect(seen).toEqual([1, 1, 1])
      // And the current worker is still served in v1 meanwhile.
      const cur = await up.infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + 10_000, items: [{ x: 5 }] }, 10_000, undefined)
      expect((cur.items?.[0] as { y: number }).y).toBe(10)
    } finally {
      clearInterval(beat)
      sub.unsubscribe()
    }
  }, 60_000)

  it('a message of a future envelope version is refused clearly (BAD_REQUEST naming the version), not dropped', async () => {
    const c = await nc()
    const future = plain.pack({ v: 3, id: 'from-the-future', model: 'sleepy', deadline: 4102444800000, items: [{ x: 1 }] })
    const reply = plain.unpack((await c.request(S.infer('sleepy'), future, { timeout: 10_000 })).data) as { error?: { code: string; message: string } }
    expect(reply.error?.code).toBe('BAD_REQUEST')
    expect(reply.error?.message).toMatch(/v must be 1, got 3/)
  })
})
