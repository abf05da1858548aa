// Admission per origin: every origin that runs inference passes the door's checks, run by the door
// itself (not by each codec). A worker's heartbeat says model `m`'s queue is 5 s deep (1000 s for
// the job test), the probe interval is huge, so after the one probe every request of `m` must be
// refused 503 OVERLOADED by the worker-wait check, before anything is published. Also: the
// in-flight bound is the door's, so gRPC has it too.
import { afterEach, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { Registry } from '@cohort/metrics'
import { decodeRequest, encodeHeartbeat, encodeReply, encodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { createApp, type GatewayApp } from './app.ts'
import type { GatewayOptions } from './options.ts'
import { PROTO_DIR, startGrpcServer } from './adapters/grpc/server.ts'
import { createGatewayCore } from './core.ts'

const subj = subjects('cohort')
const META: ModelMeta = {
  name: 'm',
  versions: ['1'],
  platform: 'cohort',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1] }],
  outputs: [{ name: 'x', datatype: 'FP32', shape: [-1] }],
  kind: 'predictor',
  ready: true,
  maxBatchSize: 8,
  maxDelayMs: 0,
}
const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

/** A worker for `m` whose heartbeat announces `waitMs` of queued work; counts what is published to it. */
function deepQueue(transport: InProcessTransport, waitMs: number, proto = 2) {
  const published: string[] = []
  const meta = transport.subscribe(subj.meta('m'))
  void (async () => {
    for await (const m of meta) m.respond(encodeValue(META))
  })()
  for (const s of [subj.infer('m'), subj.overflow('m')]) {
    const sub = transport.subscribe(s)
    void (async () => {
      for await (const m of sub) published.push(m.subject)
    })()
  }
  transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 600_000, proto, models: { m: { queued: 1000, waitMs, serviceMs: 10 } } }))
  return published
}

async function setup(waitMs = 5_000, o: Partial<GatewayOptions> = {}) {
  const transport = new InProcessTransport()
  const registry = new Registry()
  // probe once, then never again within the test
  const app = createApp({ transport, registry, metaTimeoutMs: 200, workerWait: { probeIntervalMs: 1e9 }, ...o })
  const published = deepQueue(transport, waitMs)
  await new Promise((r) => setTimeout(r, 10))
  closers.push(async () => {
    await app.close()
    await transport.close()
  })
  const refusals = () => {
    const line = registry
      .render()
      .split('\n')
      .find((l) => l.startsWith('cohort_door_refusals_total{') && l.includes('check="worker_wait"'))
    return line ? Number(line.split(' ').pop()) : 0
  }
  return { app, transport, published, refusals }
}

const post = (app: GatewayApp, path: string, body: unknown, headers: Record<string, string> = {}) =>
  app.request(path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '1000', ...headers }, body: JSON.stringify(body) }) as Promise<Response>

/** The probe passes (nothing answers it in time), then the same call is refused at the door. */
async function probeThenRefused(app: GatewayApp, path: string, body: unknown, headers: Record<string, string> = {}) {
  const probe = await post(app, path, body, headers)
  expect(probe.status).not.toBe(503)
  const res = await post(app, path, body, headers)
  expect(res.status).toBe(503)
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  return (await res.json()) as Record<string, unknown>
}

describe('admission at the door, per origin', () => {
  it('bulk: a bulk call of a model no worker can serve in time is refused 503 before any item is sent', async () => {
    const { app, published, refusals } = await setup()
    const probe = await post(app, '/models/m/predictions/bulk', { inputs: [{ x: 1 }, { x: 2 }] })
    expect(probe.status).not.toBe(503)
    const sentByProbe = published.length
    const res = await post(app, '/models/m/predictions/bulk', { inputs: [{ x: 1 }, { x: 2 }] })
    expect(res.status).toBe(503)
    expect(await res.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/worker-wait check/) })
    expect(published.length).toBe(sentByProbe)
    expect(refusals()).toBe(1)
  })

  it('OpenAI: the model named in the body is judged before the first send (the check no longer returns early)', async () => {
    const { app, published, refusals } = await setup()
    const body = await probeThenRefused(app, '/v1/completions', { model: 'm', prompt: 'hi', max_tokens: 2 })
    expect(JSON.stringify(body)).toMatch(/worker-wait check/)
    expect(published.filter((s) => s.includes('.infer.') || s.includes('.overflow.')).length).toBeLessThanOrEqual(1)
    expect(refusals()).toBe(1)
  })

  it('sync predictions: refused 503; an async submit is still accepted 202 (its run is judged as a job)', async () => {
    const { app, refusals } = await setup()
    const body = await probeThenRefused(app, '/models/m/predictions', { input: { x: 1 } })
    expect(body).toMatchObject({ code: 'OVERLOADED' })
    const queued = await post(app, '/models/m/predictions', { input: { x: 1 } }, { prefer: 'respond-async' })
    expect(queued.status).toBe(202)
    expect(refusals()).toBeGreaterThanOrEqual(1)
  })

  it('in-memory jobs: a job no worker can finish before its deadline is refused by the door, waited out and tried again (never published), and fails OVERLOADED at its deadline', async () => {
    const { app, published, refusals } = await setup(1_000_000, { predictions: { timeoutMs: 1_500, deferDelayMs: 100, deferMaxDelayMs: 200 } })
    // The probe: a sync prediction (nothing answers; its 1 s header deadline ends it).
    expect((await post(app, '/models/m/predictions', { input: { x: 0 } })).status).not.toBe(503)
    const before = published.length
    const r = await post(app, '/models/m/predictions', { input: { x: 1 } }, { prefer: 'respond-async' })
    expect(r.status).toBe(202)
    const { id } = (await r.json()) as { id: string }
    await expect.poll(async () => ((await (await app.request(`/predictions/${id}`)).json()) as { status: string }).status, { timeout: 5_000, interval: 20 }).toBe('failed')
    const done = (await (await app.request(`/predictions/${id}`)).json()) as { error: string; deferrals?: number }
    // Each deferral followed a worker-wait refusal, none of them published. The last try may reach
    // the door with less time left than the model's run (a loaded machine): the door then lets the
    // worker answer it exactly, so it is published once and fails on its deadline instead.
    expect(done.deferrals).toBeGreaterThanOrEqual(1)
    expect(refusals()).toBeGreaterThanOrEqual(done.deferrals ?? 0)
    expect(published.length - before).toBeLessThanOrEqual(1)
    expect(done.error).toMatch(published.length === before ? /worker-wait check/ : /worker-wait check|no reply|deadline/i)
  })

  it('bridge and job origins through door.predict: admitted by their own deadline, refused as an outcome (not thrown)', async () => {
    const transport = new InProcessTransport()
    const core = createGatewayCore({ transport, workerWait: { probeIntervalMs: 1e9 }, metaTimeoutMs: 200 })
    closers.push(async () => {
      await core.close()
      await transport.close()
    })
    const published = deepQueue(transport, 5_000, 1)
    // answer what is published, so the probe succeeds
    const sub = transport.subscribe(subj.infer('m'), { queue: 'answer' })
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        m.respond(encodeReply({ v: 1, id: req.id, items: [42] }))
      }
    })()
    await new Promise((r) => setTimeout(r, 10))
    const call = (deadlineMs: number) =>
      core.door.predict({ origin: 'bridge', route: 'bridge redis', model: 'm', input: { x: 1 }, deadline: Date.now() + deadlineMs, retryable: true })
    await call(1_000) // the probe
    const refused = await call(1_000)
    expect(refused.error).toMatchObject({ code: 'OVERLOADED', message: expect.stringMatching(/worker-wait check/) })
    // Its own deadline, not requestTimeoutMs: 60 s fits a 5 s queue, so it is admitted (and answered).
    const fits = await call(60_000)
    expect(fits).toMatchObject({ output: 42 })
    expect(published.length).toBeGreaterThan(0)
  })

  it('gRPC has the in-flight bound: a call past maxRequests is RESOURCE_EXHAUSTED OVERLOADED, and room comes back', async () => {
    const transport = new InProcessTransport()
    const held: (() => void)[] = []
    const sub = transport.subscribe(subj.infer('m'))
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        held.push(() => m.respond(encodeReply({ v: 1, id: req.id, tensors: req.tensors ?? {} })))
      }
    })()
    const core = createGatewayCore({ transport, workerLoss: false, inflight: { maxRequests: 1 } })
    const server = await startGrpcServer({ core, port: 0 })
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
    const client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
    closers.push(async () => {
      for (const r of held.splice(0)) r()
      client.close()
      await server.close()
      await core.close()
      await transport.close()
    })
    const req = { model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } }] }
    const call = () =>
      new Promise<grpc.ServiceError | null>((resolve) =>
        client['ModelInfer']!(req, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e: grpc.ServiceError | null) => resolve(e)),
      )
    const first = call()
    await expect.poll(() => held.length, { timeout: 5_000, interval: 5 }).toBe(1)
    const second = await call()
    expect(second?.code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    expect(second?.metadata.get('cohort-code')).toEqual(['OVERLOADED'])
    expect(second?.details).toMatch(/in-flight bound/)
    expect(core.door.inflight?.requests).toBe(1)
    held.shift()!()
    expect(await first).toBeNull()
    expect(core.door.inflight?.requests).toBe(0)
    const third = call()
    await expect.poll(() => held.length, { timeout: 5_000, interval: 5 }).toBe(1)
    held.shift()!()
    expect(await third).toBeNull()
  })
})
