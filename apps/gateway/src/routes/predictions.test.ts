// Cog-style predictions through the gateway over the in-process transport with a real worker:
// async (Prefer: respond-async), idempotent PUT, GET, cancel, webhooks (filter, retry with backoff),
// 422 shapes, /health-check and /openapi.json. Async predictions live in memory here (no NATS).
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { backoffMs } from '@cohort/predictions'
import { createApp } from '../app.ts'
import { openApi, tensorItemSchema } from './predictions-meta.ts'
import type { JsonBody } from '@cohort/test-support'

/** Inputs `echo` was called with, to count runs. */
const seen: number[] = []
/** Resolves the running `hold` batch. */
let release: () => void = () => undefined

const echo = definePredictor({
  name: 'echo',
  input: Type.Object({ n: Type.Number(), hold: Type.Boolean({ default: false }) }),
  output: Type.Object({ n: Type.Number(), batch: Type.Integer() }),
  batch: { maxBatchSize: 16 },
  async predict(xs) {
    seen.push(...xs.map((x) => x.n))
    if (xs.some((x) => x.hold)) {
      await new Promise<void>((r) => (release = r))
    }
    return xs.map((x) => (x.n === 13 ? itemError('unlucky 13', 'PREDICTOR_FAILED') : { n: x.n, batch: xs.length }))
  },
})

interface Hook {
  event: string
  body: JsonBody
}

/** A local webhook receiver that answers 503 to the first `failFirst` attempts of each event. */
async function receiver(failFirst = 0): Promise<{ url: string; got: Hook[]; attempts: Map<string, number[]>; server: Server }> {
  const got: Hook[] = []
  const attempts = new Map<string, number[]>()
  const server = createServer((req: IncomingMessage, res) => {
    let body = ''
    req.on('data', (d: Buffer) => (body += d.toString()))
    req.on('end', () => {
      const parsed = JSON.parse(body)
      const event = String(req.headers['x-cohort-webhook-event'])
      const key = `${parsed.id}:${event}`
      const list = attempts.get(key) ?? []
      list.push(Date.now())
      attempts.set(key, list)
      if (list.length <= failFirst) {
        res.writeHead(503).end()
        return
      }
      got.push({ event, body: parsed })
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, attempts, server }
}

async function until<T>(f: () => Promise<T | undefined> | T | undefined, ms = 10_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined && v !== false) {
      return v
    }
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 10))
  }
}

const send = async (app: Hono, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const r = await app.request(path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  return { status: r.status, body: await r.json() }
}
const ASYNC = { prefer: 'respond-async' }

describe('Cog-style predictions (in-process, async held in memory)', () => {
  let transport: InProcessTransport
  let worker: CohortWorker
  let app: Hono
  const servers: Server[] = []

  beforeAll(async () => {
    transport = new InProcessTransport()
    worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)], outputSchemas: { echo: echo.output } })
    await worker.start()
    app = createApp({ transport, metaTimeoutMs: 200, predictions: { webhooks: { initialDelayMs: 30, maxAttempts: 4 } } })
  })
  afterAll(async () => {
    release()
    for (const s of servers) {
      s.close()
    }
    await worker.drain()
    await transport.close()
  })

  it('answers Prefer: respond-async with 202 and the prediction, then GET gives the result', async () => {
    const r = await send(app, 'POST', '/predictions', { input: { n: 4 } }, ASYNC)
    expect(r.status).toBe(202)
    expect(r.body).toMatchObject({ status: 'starting', input: { n: 4 }, output: null, model: 'echo', logs: '', error: null })
    expect(r.body.id).toMatch(/^[0-9a-f-]{36}$/)
    const done = await until(async () => {
      const g = await send(app, 'GET', `/predictions/${r.body.id}`)
      return g.body.status === 'succeeded' ? g : undefined
    })
    expect(done.status).toBe(200)
    expect(done.body.output).toEqual({ n: 4, batch: 1 })
    expect(typeof done.body.metrics.predict_time).toBe('number')
    for (const k of ['created_at', 'started_at', 'completed_at']) {
      expect(Number.isNaN(Date.parse(done.body[k])), k).toBe(false)
    }
    const other = await send(app, 'GET', `/models/echo/predictions/${String(r.body.id)}`)
    expect(other.body.id).toBe(r.body.id)
  })

  it('makes one prediction of two PUTs with the same id; PUT without Prefer waits for the result', async () => {
    const before = seen.filter((n) => n === 777).length
    const [a, b] = await Promise.all([send(app, 'PUT', '/predictions/dup-1', { input: { n: 777 } }, ASYNC), send(app, 'PUT', '/predictions/dup-1', { input: { n: 777 } }, ASYNC)])
    expect([a.status, b.status]).toEqual([202, 202])
    expect(a.body.created_at).toBe(b.body.created_at)
    const sync = await send(app, 'PUT', '/predictions/dup-1', { input: { n: 777 } })
    expect(sync.status).toBe(200)
    expect(sync.body).toMatchObject({ id: 'dup-1', status: 'succeeded', output: { n: 777 } })
    expect(seen.filter((n) => n === 777).length - before).toBe(1)
    const fresh = await send(app, 'PUT', '/models/echo/predictions/put-sync', { input: { n: 5 } })
    expect(fresh).toMatchObject({ status: 200, body: { id: 'put-sync', status: 'succeeded', output: { n: 5, batch: 1 } } })
    const mismatch = await send(app, 'PUT', '/predictions/put-x', { id: 'other', input: { n: 1 } })
    expect(mismatch.status).toBe(422)
    expect(mismatch.body.detail[0].loc).toEqual(['body', 'id'])
  })

  it('cancels a queued prediction: it ends canceled and never runs; unknown ids are 404', async () => {
    const blocker = send(app, 'POST', '/models/echo/predictions', { input: { n: 1, hold: true } })
    await until(() => seen.includes(1))
    const r = await send(app, 'POST', '/predictions', { id: 'to-cancel', input: { n: 4242 } }, ASYNC)
    expect(r.status).toBe(202)
    const c = await send(app, 'POST', '/predictions/to-cancel/cancel')
    expect(c).toMatchObject({ status: 200, body: { id: 'to-cancel', status: 'canceled' } })
    release()
    expect((await blocker).status).toBe(200)
    await new Promise((res) => setTimeout(res, 100))
    expect((await send(app, 'GET', '/predictions/to-cancel')).body.status).toBe('canceled')
    expect(seen).not.toContain(4242)
    expect(await send(app, 'GET', '/predictions/nope')).toMatchObject({ status: 404, body: { code: 'PREDICTION_NOT_FOUND' } })
    expect(await send(app, 'POST', '/predictions/nope/cancel')).toMatchObject({ status: 404, body: { code: 'PREDICTION_NOT_FOUND' } })
  })

  it('answers schema and request validation failures 422 with Cog detail', async () => {
    const schema = await send(app, 'POST', '/predictions', { input: { n: 'x' } })
    expect(schema.status).toBe(422)
    expect(schema.body.detail).toEqual([{ loc: ['body', 'input', 'n'], msg: 'Expected number', type: 'value_error' }])
    const filter = await send(app, 'POST', '/predictions', { input: { n: 1 }, webhook: 'http://127.0.0.1:9/x', webhook_events_filter: ['start', 'bogus'] }, ASYNC)
    expect(filter.status).toBe(422)
    expect(filter.body.detail[0]).toMatchObject({ loc: ['body', 'webhook_events_filter', 1], type: 'type_error.enum' })
    const hook = await send(app, 'POST', '/predictions', { input: { n: 1 }, webhook: 'ftp://x' }, ASYNC)
    expect(hook.status).toBe(422)
    expect(hook.body.detail[0].loc).toEqual(['body', 'webhook'])
    // Async requests are checked against the predictor's schema before they are accepted (defaults
    // applied), so nothing is stored for a bad one.
    const bad = await send(app, 'PUT', '/predictions/bad-async', { input: { n: 1, hold: 'yes' } }, ASYNC)
    expect(bad.status).toBe(422)
    expect(bad.body.detail).toEqual([{ loc: ['body', 'input', 'hold'], msg: 'Expected boolean', type: 'value_error' }])
    expect((await send(app, 'GET', '/predictions/bad-async')).status).toBe(404)
    const missing = await send(app, 'POST', '/predictions', { input: {} }, ASYNC)
    expect(missing.status).toBe(422)
    expect(missing.body.detail[0].loc).toEqual(['body', 'input', 'n'])
  })

  it('sends webhooks for the filtered events, retrying failed deliveries with backoff', async () => {
    const rx = await receiver(2)
    servers.push(rx.server)
    const all = await send(app, 'POST', '/predictions', { id: 'hook-all', input: { n: 7 }, webhook: rx.url }, ASYNC)
    const only = await send(app, 'POST', '/predictions', { id: 'hook-done', input: { n: 13 }, webhook: rx.url, webhook_events_filter: ['completed'] }, ASYNC)
    expect([all.status, only.status]).toEqual([202, 202])
    await until(() => rx.got.filter((h) => h.body.id === 'hook-all').length === 3 && rx.got.some((h) => h.body.id === 'hook-done'))
    await new Promise((r) => setTimeout(r, 300))
    const events = rx.got.filter((h) => h.body.id === 'hook-all')
    expect(events.map((h) => h.event)).toEqual(['start', 'output', 'completed'])
    expect(events[0]!.body.status).toBe('processing')
    expect(events[2]!.body).toMatchObject({ status: 'succeeded', output: { n: 7 } })
    const done = rx.got.filter((h) => h.body.id === 'hook-done')
    expect(done.map((h) => h.event)).toEqual(['completed'])
    expect(done[0]!.body).toMatchObject({ status: 'failed', code: 'PREDICTOR_FAILED' })
    // Each delivered event took 3 attempts (two 503s), spaced by the doubling backoff (30, 60 ms).
    const times = rx.attempts.get('hook-done:completed')!
    expect(times).toHaveLength(3)
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(25)
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(55)
    expect(backoffMs(1, 30, 1000)).toBe(30)
    expect(backoffMs(3, 30, 1000)).toBe(120)
    expect(backoffMs(10, 30, 1000)).toBe(1000)
  })

  it('gives up on a webhook after maxAttempts; the prediction is unaffected', async () => {
    const rx = await receiver(100)
    servers.push(rx.server)
    await send(app, 'POST', '/predictions', { id: 'hook-dead', input: { n: 2 }, webhook: rx.url, webhook_events_filter: ['completed'] }, ASYNC)
    await until(() => (rx.attempts.get('hook-dead:completed')?.length ?? 0) >= 4)
    await new Promise((r) => setTimeout(r, 600))
    expect(rx.attempts.get('hook-dead:completed')).toHaveLength(4)
    const g = await send(app, 'GET', '/predictions/hook-dead')
    expect(g.body.status).toBe('succeeded') // a failing webhook never affects the prediction
  })

  it('answers /health-check with Cog shape and /openapi.json with Cog components', async () => {
    expect(await send(app, 'GET', '/health-check')).toEqual({ status: 200, body: { status: 'READY', setup: { status: 'succeeded', logs: '' } } })
    const empty = createApp({ transport: new InProcessTransport(), metaTimeoutMs: 50 })
    expect((await send(empty, 'GET', '/health-check')).body.status).toBe('STARTING')
    const o = (await send(app, 'GET', '/openapi.json')).body
    expect(o.openapi).toBe('3.0.2')
    for (const k of ['Input', 'Output', 'PredictionRequest', 'PredictionResponse', 'Status', 'WebhookEvent', 'HTTPValidationError', 'ValidationError', 'Input_echo']) {
      expect(o.components.schemas[k], k).toBeDefined()
    }
    expect(o.components.schemas.Input).toMatchObject({ title: 'Input', type: 'object', properties: { n: { type: 'number' }, hold: { type: 'boolean', default: false } } })
    expect(o.components.schemas.Output.properties.batch).toEqual({ type: 'integer' })
    expect(o.paths['/predictions'].post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/PredictionRequest' })
    expect(Object.keys(o.paths)).toEqual(expect.arrayContaining(['/predictions/{prediction_id}', '/predictions/{prediction_id}/cancel', '/health-check']))
  })

  it('/openapi.json matches behaviour: defaulted fields are not required, and the 400/404 answers the routes give are listed', async () => {
    const o = (await send(app, 'GET', '/openapi.json')).body
    // `hold` has a default: a request may omit it (and is served).
    expect(o.components.schemas.Input.required).toEqual(['n'])
    expect((await send(app, 'POST', '/predictions', { input: { n: 1 } })).status).toBe(200)
    const declared = (path: string, method: string) => Object.keys(o.paths[path][method].responses)
    const bad = await send(app, 'POST', '/predictions', 'not json')
    expect(bad.status).toBe(400)
    expect(declared('/predictions', 'post')).toEqual(expect.arrayContaining(['200', '202', '400', '422', '413', '503']))
    const missing = await send(app, 'GET', '/predictions/never-made')
    expect(missing.status).toBe(404)
    expect(declared('/predictions/{prediction_id}', 'get')).toContain('404')
    expect(declared('/predictions/{prediction_id}/cancel', 'post')).toContain('404')
    expect(declared('/predictions/{prediction_id}', 'put')).toEqual(expect.arrayContaining(['400', '404', '409', '422']))
    // Every error answer has the declared Error shape.
    expect(o.components.schemas.Error.required).toEqual(['error', 'code'])
    expect(Object.keys(bad.body)).toEqual(expect.arrayContaining(['error', 'code']))
    expect(Object.keys(missing.body)).toEqual(expect.arrayContaining(['error', 'code']))
  })

  it('/openapi.json matches behaviour: input and a body are required, null fields are nullable, a PUT body declares no id', async () => {
    const o = (await send(app, 'GET', '/openapi.json')).body
    const req = o.components.schemas.PredictionRequest
    expect(req.required).toEqual(['input'])
    expect((await send(app, 'POST', '/predictions', {})).status).toBe(400)
    expect(o.paths['/predictions'].post.requestBody.required).toBe(true)
    // id/webhook null are taken as absent; an id outside the pattern is a 422.
    expect([req.properties.id.nullable, req.properties.webhook.nullable]).toEqual([true, true])
    expect((await send(app, 'POST', '/predictions', { input: { n: 1 }, id: null, webhook: null })).status).toBe(200)
    expect(new RegExp(req.properties.id.pattern).test('')).toBe(false)
    expect((await send(app, 'POST', '/predictions', { input: { n: 1 }, id: '' })).status).toBe(422)
    // A prediction not yet done has output, error, completed_at null: the response schema allows it.
    const queued = await send(app, 'POST', '/predictions', { input: { n: 2 } }, ASYNC)
    expect(queued.body.output).toBeNull()
    const res = o.components.schemas.PredictionResponse.properties
    for (const k of ['output', 'error', 'started_at', 'completed_at']) {
      expect(res[k].nullable).toBe(true)
    }
    // The path names the id: a different body id is a 422, so the PUT body schema has no `id`.
    const put = o.paths['/predictions/{prediction_id}'].put.requestBody
    expect(put.content['application/json'].schema.properties.id).toBeUndefined()
    expect((await send(app, 'PUT', '/predictions/abc', { input: { n: 1 }, id: 'other' })).status).toBe(422)
  })

  it('describes an ONNX model input per item, without the batch dim', () => {
    expect(tensorItemSchema({ name: 'x', datatype: 'FP32', shape: [-1, 2, 3] })).toEqual({
      title: 'x',
      type: 'array',
      minItems: 2,
      maxItems: 2,
      items: { type: 'array', minItems: 3, maxItems: 3, items: { type: 'number' } },
    })
    expect(tensorItemSchema({ name: 't', datatype: 'BYTES', shape: [-1] })).toEqual({ title: 't', type: 'string' })
    const doc = openApi(
      [
        {
          name: 'm',
          versions: ['1'],
          platform: 'onnxruntime',
          kind: 'onnx',
          ready: true,
          maxBatchSize: 8,
          maxDelayMs: 0,
          inputs: [{ name: 'ids', datatype: 'INT64', shape: [-1, -1] }],
          outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
        },
      ],
      'm',
      '1',
    ) as JsonBody
    expect(doc.components.schemas.Input).toEqual({
      title: 'Input',
      type: 'object',
      properties: { ids: { title: 'ids', type: 'array', items: { type: 'integer' } } },
      required: ['ids'],
    })
    expect(doc.components.schemas.Output.properties.y.minItems).toBe(4)
  })
})
