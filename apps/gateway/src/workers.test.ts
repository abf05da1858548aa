// Readiness and GET /v2/workers from the NATS services protocol ($SRV.INFO / $SRV.STATS), over the
// in-process transport with real CohortWorkers and hand-written $SRV responders for edge cases.
import { afterEach, describe, expect, it } from 'vitest'
import { encodeRequest, encodeValue, subjects, type InferRequest } from '@cohort/protocol'
import { InProcessTransport, type TransportSubscription } from '@cohort/transport'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'
import type { WorkerSummary } from './discovery.ts'

/** The answer of `GET /v2/workers`. */
type WorkersBody = { workers: WorkerSummary[] }

const subj = subjects()
const enc = new TextEncoder()

const adder = definePredictor({
  name: 'adder',
  input: Type.Object({ a: Type.Number(), b: Type.Number({ default: 0 }) }),
  output: Type.Object({ sum: Type.Number() }),
  predict: (xs) => xs.map((x) => (x.a === 13 ? itemError('unlucky 13') : { sum: x.a + x.b })),
})
const zulu = definePredictor({
  name: 'zulu',
  input: Type.Object({ text: Type.String() }),
  predict: (xs) => xs.map((x) => x.text.toUpperCase()),
})

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) {
    await c()
  }
})

async function setup(ids: string[]) {
  const transport = new InProcessTransport()
  const workers: CohortWorker[] = []
  for (const id of ids) {
    const w = new CohortWorker({ transport, id, runners: [new PredictorRunner(adder), new PredictorRunner(zulu)] })
    await w.start()
    workers.push(w)
  }
  const app = createApp({ transport, metaTimeoutMs: 40 })
  cleanups.push(async () => {
    await Promise.all(workers.map((w) => w.drain()))
    await transport.close()
  })
  return { transport, workers, app }
}

/** Answer `subject` with `body` (JSON unless bytes) on every request. */
function answer(t: InProcessTransport, subject: string, body: unknown): void {
  const sub: TransportSubscription = t.subscribe(subject)
  void (async () => {
    for await (const m of sub) {
      m.respond(body instanceof Uint8Array ? body : enc.encode(JSON.stringify(body)))
    }
  })()
  cleanups.push(() => sub.unsubscribe())
}

/** Status and parsed body. */
async function json(r: Response | Promise<Response>): Promise<{ status: number; body: unknown }> {
  const res = await r
  return { status: res.status, body: await res.json() }
}

/** Status and body of `/v2/workers`, read as its answer type. */
async function workers(r: Response | Promise<Response>): Promise<{ status: number; body: WorkersBody }> {
  const { status, body } = await json(r)
  return { status, body: body as WorkersBody }
}

describe('gateway readiness and /v2/workers from $SRV', () => {
  it('counts the workers and models that answer $SRV.INFO', async () => {
    const { app } = await setup(['w1', 'w2'])
    expect(await json(app.request('/v2/health/ready'))).toEqual({ status: 200, body: { ready: true, models: 2, workers: 2 } })
  })

  it('lists every worker with its models, settings and request counters', async () => {
    const { app, transport } = await setup(['w2', 'w1'])
    const req: InferRequest = { v: 1, id: 'r1', model: 'adder', deadline: Date.now() + 5_000, items: [{ a: 1 }, { a: 13 }] }
    await transport.request(subj.infer('adder'), encodeRequest(req), { timeoutMs: 2_000 })
    const r = await workers(app.request('/v2/workers'))
    expect(r.status).toBe(200)
    expect(r.body.workers.map((w) => w.id)).toEqual(['w1', 'w2'])
    for (const w of r.body.workers) {
      expect(w).toMatchObject({ version: '0.1.0', state: 'serving', models: ['adder', 'zulu'] })
      expect(Date.parse(w.started ?? '')).toBeGreaterThan(0)
      expect(w.endpoints[0]).toMatchObject({
        model: 'adder',
        subject: 'cohort.infer.adder',
        queue_group: 'cohort.q.adder',
        ready: true,
        max_batch_size: 32,
        policy: 'eager',
        concurrency: 1,
      })
    }
    // One request went to one worker (queue group); it had a failed item, so it counts as an error.
    const served = r.body.workers.filter((w) => w.stats.requests === 1)
    expect(served).toHaveLength(1)
    expect(served[0]?.stats).toEqual({ requests: 1, errors: 1, queued: 0, batches: 1 })
    expect(served[0]?.endpoints[0]).toMatchObject({
      requests: 1,
      errors: 1,
      last_error: 'PREDICTOR_FAILED: unlucky 13',
      batches: 1,
      mean_batch_size: 2,
      queued: 0,
      running: 0,
    })
    expect(served[0]?.endpoints[0]?.average_processing_ms).toBeGreaterThan(0)
  })

  it('answers an empty list without workers, and readiness falls back to cohort.discover', async () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    const app = createApp({ transport, metaTimeoutMs: 40 })
    expect(await json(app.request('/v2/workers'))).toEqual({ status: 200, body: { workers: [] } })
    expect((await json(app.request('/v2/health/ready'))).body).toEqual({ ready: false, models: 0, workers: 0 })
    // An older worker that only answers cohort.discover still makes the gateway ready.
    const old = { name: 'm', versions: ['1'], ready: true, inputs: [], outputs: [] }
    answer(transport, subj.discover(), encodeValue({ worker: 'old', models: [old] }))
    expect(await json(app.request('/v2/health/ready'))).toEqual({ status: 200, body: { ready: true, models: 1, workers: 1 } })
  })

  it('leaves draining workers out of readiness', async () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    const app = createApp({ transport, metaTimeoutMs: 40 })
    const info = (id: string, state: string, ready: string) => ({
      type: 'io.nats.micro.v1.info_response',
      name: 'cohort-worker',
      id,
      version: '0.1.0',
      metadata: { models: 'm', subject_prefix: 'cohort', state },
      description: '',
      endpoints: [{ name: 'm', subject: 'cohort.infer.m', queue_group: 'cohort.q.m', metadata: { model: 'm', ready } }],
    })
    answer(transport, '$SRV.INFO.cohort-worker', info('a', 'draining', 'false'))
    expect(await json(app.request('/v2/health/ready'))).toEqual({ status: 503, body: { ready: false, models: 0, workers: 0 } })
    answer(transport, '$SRV.INFO.cohort-worker', info('b', 'serving', 'true'))
    expect(await json(app.request('/v2/health/ready'))).toEqual({ status: 200, body: { ready: true, models: 1, workers: 1 } })
    const ws = await workers(app.request('/v2/workers'))
    expect(ws.body.workers.map((w) => [w.id, w.state])).toEqual([
      ['a', 'draining'],
      ['b', 'serving'],
    ])
  })

  it('ignores garbage, other services and Cohort workers of another subject prefix', async () => {
    const { app, transport } = await setup(['w1'])
    answer(transport, '$SRV.INFO.cohort-worker', new Uint8Array([0xff, 0x00]))
    answer(transport, '$SRV.INFO.cohort-worker', { type: 'io.nats.micro.v1.info_response', name: 'cohort-worker', id: 'x', endpoints: 5 })
    answer(transport, '$SRV.INFO.cohort-worker', {
      type: 'io.nats.micro.v1.info_response',
      name: 'cohort-worker',
      id: 'other-deployment',
      version: '0.1.0',
      metadata: { models: 'm', subject_prefix: 'staging', state: 'serving' },
      description: '',
      endpoints: [{ name: 'm', subject: 'staging.infer.m', metadata: { ready: 'false' } }],
    })
    const billing = { type: 'io.nats.micro.v1.info_response', name: 'billing', id: 'b1', version: '1.0.0', endpoints: [] }
    answer(transport, '$SRV.INFO.cohort-worker', billing)
    expect(await json(app.request('/v2/health/ready'))).toEqual({ status: 200, body: { ready: true, models: 2, workers: 1 } })
    expect((await workers(app.request('/v2/workers'))).body.workers.map((w) => w.id)).toEqual(['w1'])
  })
})
