// Two deployments with different subject prefixes on one real nats-server (JetStream): each has
// its own KV buckets (`<prefix>-models`, `<prefix>-config`; the default prefix keeps `cohort-*`),
// so an admin patch in one never reconfigures the other's model of the same name.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '@cohort/gateway'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { kvBuckets } from '@cohort/protocol'
import { startNatsServer, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import type { Hono } from 'hono'

const echo = definePredictor({ name: 'echo', input: Type.Object({ a: Type.Number() }), predict: (xs) => xs.map((x) => x.a) })

interface Deployment {
  transport: Transport
  worker: CohortWorker
  app: Hono
}

let nats: NatsServerHandle
const conns: NatsConnection[] = []
const deps: Deployment[] = []

async function deploy(prefix: string | undefined): Promise<Deployment> {
  const nc = await connect({ servers: nats.url })
  conns.push(nc)
  const transport = createNatsTransport(nc, prefix ? { subjectPrefix: prefix } : {})
  const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)], logger: quiet, ...(prefix ? { subjectPrefix: prefix } : {}) })
  await worker.start()
  const app = createApp({ transport, metaTimeoutMs: 2_000, logger: quiet, ...(prefix ? { subjectPrefix: prefix } : {}) })
  const d = { transport, worker, app }
  deps.push(d)
  return d
}

let a: Deployment
let b: Deployment

beforeAll(async () => {
  nats = await startNatsServer()
  a = await deploy(undefined)
  b = await deploy('tenant-b.prod')
})

afterAll(async () => {
  for (const d of deps) {
    await d.worker.drain()
    await d.transport.close()
  }
  for (const nc of conns) {
    await nc.close()
  }
  await ifStarted(nats)?.stop()
})

async function live(d: Deployment): Promise<Record<string, unknown>> {
  const r = await d.app.request('/admin/models/echo/batching')
  return ((await r.json()) as { live: Record<string, unknown> }).live
}

describe('KV buckets named from the subject prefix', () => {
  it('names the default prefix cohort-models / cohort-config, others <prefix>-models / -config', () => {
    expect(kvBuckets()).toEqual({ models: 'cohort-models', config: 'cohort-config' })
    expect(kvBuckets('tenant-b.prod')).toEqual({ models: 'tenant-b_prod-models', config: 'tenant-b_prod-config' })
    expect(() => kvBuckets('a.*')).toThrow(RangeError)
  })

  it('keeps each deployment to its own buckets on one server', async () => {
    // Both deployments' gateways write their config bucket.
    for (const [d, n] of [
      [a, 3],
      [b, 5],
    ] as const) {
      const r = await d.app.request('/admin/models/echo/batching', { method: 'PUT', body: JSON.stringify({ maxBatchSize: n }) })
      expect(r.status).toBe(200)
    }
    const jsm = await jetstreamManager(conns[0]!)
    const streams: string[] = []
    for await (const s of jsm.streams.list()) {
      streams.push(s.config.name)
    }
    expect(streams.sort()).toEqual(['KV_cohort-config', 'KV_cohort-models', 'KV_tenant-b_prod-config', 'KV_tenant-b_prod-models'])
  })

  it('an admin patch in one deployment reconfigures only its own worker', async () => {
    await expect.poll(() => live(a), { timeout: 10_000 }).toMatchObject({ maxBatchSize: 3 })
    await expect.poll(() => live(b), { timeout: 10_000 }).toMatchObject({ maxBatchSize: 5 })
    const r = await b.app.request('/admin/models/echo/batching', { method: 'PUT', body: JSON.stringify({ maxBatchSize: 9 }) })
    expect(r.status).toBe(200)
    await expect.poll(() => live(b), { timeout: 10_000 }).toMatchObject({ maxBatchSize: 9 })
    expect(await live(a)).toMatchObject({ maxBatchSize: 3 })
    expect(await a.transport.config.get('echo')).toEqual({ maxBatchSize: 3 })
    expect(await b.transport.config.get('echo')).toEqual({ maxBatchSize: 9 })
  })

  it('announces models in its own directory only', async () => {
    expect(await a.transport.directory.known('echo')).toBe(true)
    expect(await b.transport.directory.known('echo')).toBe(true)
    expect(await a.transport.directory.known('only-in-b')).toBe(false)
    await b.transport.directory.announce('only-in-b', new Uint8Array([1]))
    expect(await b.transport.directory.known('only-in-b')).toBe(true)
    expect(await a.transport.directory.known('only-in-b')).toBe(false)
  })
})
