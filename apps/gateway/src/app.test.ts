// In-process tests of the gateway app: `app.request(...)` (no sockets) against createApp over an
// InProcessTransport, with a real CohortWorker or hand-written responders for edge cases.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import {
  CohortError,
  decodeCancel,
  decodeRequest,
  encodeBytesElements,
  encodeReply,
  encodeValue,
  subjects,
  type InferReply,
  type InferRequest,
  type WireError,
} from '@cohort/protocol'
import { PROMETHEUS_CONTENT_TYPE, Registry, parsePrometheus } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'
import { effectiveTimeoutMs } from './lag-check.ts'
import type { GatewayOptions } from './options.ts'
import type { JsonBody } from '@cohort/test-support'

const subj = subjects()

/** `adder`: sum = a + b (b defaults to 0); a = 13 fails that item. */
const adder = definePredictor({
  name: 'adder',
  input: Type.Object({ a: Type.Number(), b: Type.Number({ default: 0 }) }),
  output: Type.Object({ sum: Type.Number() }),
  predict: (xs) => xs.map((x) => (x.a === 13 ? itemError('unlucky 13') : { sum: x.a + x.b })),
})

/** `zulu`: upper-cases text (no output schema). */
const zulu = definePredictor({
  name: 'zulu',
  input: Type.Object({ text: Type.String() }),
  predict: (xs) => xs.map((x) => x.text.toUpperCase()),
})

/** `pad`: returns a string of n characters (to make big replies). */
const pad = definePredictor({
  name: 'pad',
  input: Type.Object({ n: Type.Integer({ minimum: 0 }) }),
  predict: (xs) => xs.map((x) => 'p'.repeat(x.n)),
})

interface Env {
  transport: InProcessTransport
  worker: CohortWorker | undefined
  app: Hono
}

const cleanups: (() => Promise<void>)[] = []
/** Unexpected (non-Cohort) errors the apps reported; none are expected outside the INTERNAL test. */
const unexpected: unknown[] = []

async function env(o: { models?: 'none' | 'all'; maxMessageBytes?: number; gateway?: Partial<GatewayOptions>; maxQueue?: number } = {}): Promise<Env> {
  const transport = new InProcessTransport(o.maxMessageBytes ? { maxMessageBytes: o.maxMessageBytes } : {})
  let worker: CohortWorker | undefined
  if (o.models !== 'none') {
    worker = new CohortWorker({
      transport,
      // zulu first: the default model is the first by name, not by registration.
      runners: [new PredictorRunner(zulu), new PredictorRunner(adder), new PredictorRunner(pad)],
      outputSchemas: { adder: adder.output },
      ...(o.maxQueue ? { batching: { maxQueue: o.maxQueue } } : {}),
    })
    await worker.start()
  }
  const app = createApp({ transport, metaTimeoutMs: 60, onUnexpectedError: (err) => unexpected.push(err), ...o.gateway })
  cleanups.push(async () => {
    await worker?.drain()
    await transport.close()
  })
  return { transport, worker, app }
}

afterAll(async () => {
  for (const c of cleanups.splice(0)) {
    await c()
  }
  expect(unexpected).toEqual([])
})

/** A hand-written responder on a model's infer subject; `reply` undefined = never answer. */
function responder(t: InProcessTransport, model: string, reply: (req: InferRequest) => InferReply | undefined) {
  const seen: InferRequest[] = []
  const sub = t.subscribe(subj.infer(model), { queue: subj.queue(model) })
  void (async () => {
    for await (const m of sub) {
      const req = decodeRequest(m.data)
      seen.push(req)
      const r = reply(req)
      if (r) {
        m.respond(encodeReply(r))
      }
    }
  })()
  return { seen, stop: () => sub.unsubscribe() }
}

/** Echo every input tensor (or item) back as the output. */
const echo = (req: InferRequest): InferReply => (req.tensors ? { v: 1, id: req.id, tensors: req.tensors } : { v: 1, id: req.id, items: req.items ?? [] })

function post(app: Hono, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: (typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body)) as BodyInit,
  }) as Promise<Response>
}

async function json(r: Response | Promise<Response>): Promise<{ status: number; headers: Headers; body: JsonBody }> {
  const res = await r
  return { status: res.status, headers: res.headers, body: await res.json() }
}

const x1 = (data: number[]) => ({ inputs: [{ name: 'a', datatype: 'FP64', shape: [data.length], data }] })

/** Split a binary-tensor-data response into its JSON header and the bytes after it. */
async function binaryParts(r: Response): Promise<{ head: JsonBody; rest: Uint8Array }> {
  const n = Number(r.headers.get('inference-header-content-length'))
  const buf = new Uint8Array(await r.arrayBuffer())
  expect(Number.isInteger(n) && n > 0 && n <= buf.byteLength).toBe(true)
  return { head: JSON.parse(new TextDecoder().decode(buf.subarray(0, n))), rest: buf.subarray(n) }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.byteLength
  }
  return out
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

describe('gateway app with a real worker', () => {
  let e: Env
  beforeAll(async () => {
    e = await env()
  })

  it('GET /v2 reports the server and its extensions, including binary_tensor_data', async () => {
    const r = await json(e.app.request('/v2'))
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      name: 'cohort',
      version: '0.1.0',
      extensions: ['binary_tensor_data', 'parameters', 'statistics', 'model_configuration', 'model_repository', 'generate'],
    })
    const named = createApp({ transport: e.transport, serverName: 'mine', serverVersion: '9.9.9' })
    expect((await json(named.request('/v2'))).body).toMatchObject({ name: 'mine', version: '9.9.9' })
    expect((await json(e.app.request('/v2/health/live'))).body).toEqual({ live: true })
  })

  it('answers unknown routes with a 404 JSON body, code NOT_FOUND', async () => {
    for (const [method, path] of [
      ['GET', '/nope'],
      ['POST', '/v2'],
      ['GET', '/v2/models/adder/infer'],
      ['DELETE', '/v2/models/adder'],
      ['GET', '/v2/models/adder/versions/1/extra'],
    ] as const) {
      const res = await e.app.request(path, { method })
      expect(res.status, `${method} ${path}`).toBe(404)
      expect(res.headers.get('content-type')).toMatch(/application\/json/)
      expect(await res.json()).toEqual({ error: `no route ${method} ${path}`, code: 'NOT_FOUND' })
    }
  })

  it('lists and describes models from the workers', async () => {
    const list = await json(e.app.request('/v2/models'))
    expect(list.status).toBe(200)
    expect(list.body.models.map((m: { name: string }) => m.name)).toEqual(['adder', 'pad', 'zulu'])
    expect(list.body.models[0]).toMatchObject({ name: 'adder', ready: true, max_batch_size: 32, versions: ['1'] })
    const meta = await json(e.app.request('/v2/models/adder'))
    expect(meta.status).toBe(200)
    expect(meta.body).toEqual({
      name: 'adder',
      versions: ['1'],
      platform: 'cohort_predictor',
      inputs: [
        { name: 'a', datatype: 'FP64', shape: [-1] },
        { name: 'b', datatype: 'FP64', shape: [-1] },
      ],
      outputs: [{ name: 'sum', datatype: 'FP64', shape: [-1] }],
    })
    expect(await json(e.app.request('/v2/models/adder/ready'))).toMatchObject({ status: 200, body: { name: 'adder', ready: true } })
  })

  it('validates model names (404 MODEL_NOT_FOUND before reading the body)', async () => {
    const long = 'm'.repeat(129)
    for (const bad of ['bad..name', '.hidden', 'trailing.', 'sp ace', 'star*', long]) {
      const path = `/v2/models/${encodeURIComponent(bad)}`
      const meta = await json(e.app.request(path))
      expect(meta.status, bad).toBe(404)
      expect(meta.body).toEqual({ error: `"${bad}" is not a valid model name`, code: 'MODEL_NOT_FOUND' })
      // Even with a body that is not JSON, the name is checked first.
      const infer = await json(post(e.app, `${path}/infer`, '{not json'))
      expect(infer.body.code, bad).toBe('MODEL_NOT_FOUND')
      expect(infer.status).toBe(404)
      const cog = await json(post(e.app, `/models/${encodeURIComponent(bad)}/predictions`, { input: {} }))
      expect(cog.status, bad).toBe(404)
      expect(cog.body.code).toBe('MODEL_NOT_FOUND')
    }
    // A valid name that no worker ever announced.
    const unknown = await json(post(e.app, '/v2/models/no-such.model_1/infer', x1([1])))
    expect(unknown.status).toBe(404)
    expect(unknown.body).toEqual({ error: 'model "no-such.model_1" is not served by any worker', code: 'MODEL_NOT_FOUND' })
    expect(unknown.headers.get('retry-after')).toBeNull()
  })

  it('serves version "1" only for a model without versions (others are 404)', async () => {
    expect((await json(e.app.request('/v2/models/adder/versions/1'))).body).toMatchObject({ name: 'adder', versions: ['1'] })
    expect((await e.app.request('/v2/models/adder/versions/1/ready')).status).toBe(200)
    const ok = await json(post(e.app, '/v2/models/adder/versions/1/infer', x1([2, 3])))
    expect(ok.status).toBe(200)
    expect(ok.body).toMatchObject({ model_name: 'adder', model_version: '1', outputs: [{ name: 'sum', data: [2, 3] }] })
    for (const v of ['2', '01', 'latest']) {
      const meta = await json(e.app.request(`/v2/models/adder/versions/${v}`))
      expect(meta.status, v).toBe(404)
      expect(meta.body).toEqual({
        error: v === '2' ? 'model "adder" has no version "2" served right now' : `model "adder" has no version "${v}" (versions are positive integers: 1, 2, ...)`,
        code: 'MODEL_NOT_FOUND',
      })
      expect((await e.app.request(`/v2/models/adder/versions/${v}/ready`)).status).toBe(404)
      const infer = await json(post(e.app, `/v2/models/adder/versions/${v}/infer`, x1([1])))
      expect(infer.status).toBe(404)
      expect(infer.body.code).toBe('MODEL_NOT_FOUND')
    }
  })

  it('runs OIP JSON inference through the worker, echoing the request id', async () => {
    const r = await json(
      post(e.app, '/v2/models/adder/infer', {
        id: 'my-req-7',
        inputs: [
          { name: 'a', datatype: 'FP64', shape: [3], data: [1, 2.5, -4] },
          { name: 'b', datatype: 'INT32', shape: [3], data: [10, 20, 30] },
        ],
      }),
    )
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      model_name: 'adder',
      model_version: '1',
      id: 'my-req-7',
      outputs: [{ name: 'sum', datatype: 'FP64', shape: [3], data: [11, 22.5, 26] }],
    })
    // Without an id, the response carries a generated one.
    const anon = await json(post(e.app, '/v2/models/adder/infer', x1([1])))
    expect(anon.body.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    const bad = await json(post(e.app, '/v2/models/adder/infer', { id: 7, ...x1([1]) }))
    expect(bad).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST', error: '"id" must be a string' } })
  })

  it('answers with the first failed item when one of N items fails', async () => {
    const r = await json(post(e.app, '/v2/models/adder/infer', x1([1, 13, 2])))
    expect(r.status).toBe(500)
    // The message names the failing item (issue 16: it used to be the bare 'unlucky 13').
    expect(r.body).toEqual({ error: 'item 1: unlucky 13', code: 'PREDICTOR_FAILED' })
    // A schema failure of one item over OIP is a 400 (422 is only for Cog-style predictions).
    const schema = await json(post(e.app, '/v2/models/zulu/infer', { inputs: [{ name: 'text', datatype: 'INT32', shape: [2], data: [1, 2] }] }))
    expect(schema.status).toBe(400)
    expect(schema.body).toEqual({ error: 'item 0: /text: Expected string', code: 'INVALID_INPUT' })
  })

  it('accepts binary tensor data in the request (Inference-Header-Content-Length + binary_data_size)', async () => {
    // a: UINT8 [2] (2 bytes), then b: FP64 [2] at an unaligned offset of the binary section.
    const head = new TextEncoder().encode(
      JSON.stringify({
        inputs: [
          { name: 'a', datatype: 'UINT8', shape: [2], parameters: { binary_data_size: 2 } },
          { name: 'b', datatype: 'FP64', shape: [2], parameters: { binary_data_size: 16 } },
        ],
      }),
    )
    const body = concat(head, new Uint8Array([3, 4]), bytesOf(new Float64Array([0.25, 0.5])))
    const r = await json(
      post(e.app, '/v2/models/adder/infer', body, {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(head.byteLength),
      }),
    )
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body.outputs).toEqual([{ name: 'sum', datatype: 'FP64', shape: [2], data: [3.25, 4.5] }])
  })

  it('returns binary outputs on binary_data_output, with the header length and raw little-endian bytes', async () => {
    const res = await post(e.app, '/v2/models/adder/infer', { ...x1([1.5, 2, -3]), parameters: { binary_data_output: true } })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('application/octet-stream')
    const { head, rest } = await binaryParts(res)
    expect(head.outputs).toEqual([{ name: 'sum', datatype: 'FP64', shape: [3], parameters: { binary_data_size: 24 } }])
    expect(rest.byteLength).toBe(24)
    expect(Array.from(new Float64Array(rest.slice().buffer))).toEqual([1.5, 2, -3])
  })

  it('rejects malformed binary requests with 400 BAD_REQUEST', async () => {
    const head = new TextEncoder().encode(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP64', shape: [1], parameters: { binary_data_size: 8 } }] }))
    const head4 = new TextEncoder().encode(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP64', shape: [1], parameters: { binary_data_size: 4 } }] }))
    const cases: [Uint8Array | string, Record<string, string>, RegExp][] = [
      [concat(head, new Uint8Array(8)), { 'inference-header-content-length': String(head.byteLength + 100) }, /is not within the body/],
      [concat(head, new Uint8Array(8)), { 'inference-header-content-length': '-1' }, /is not within the body/],
      [concat(head, new Uint8Array(4)), { 'inference-header-content-length': String(head.byteLength) }, /exceeds the binary section/],
      [head, {}, /has no Inference-Header-Content-Length/],
      // binary_data_size within the section but wrong for the datatype and shape: caught by the codec.
      [concat(head4, new Uint8Array(4)), { 'inference-header-content-length': String(head4.byteLength) }, /FP64 shape \[1\] needs 8 bytes, got 4/],
    ]
    for (const [body, headers, msg] of cases) {
      const r = await json(post(e.app, '/v2/models/adder/infer', body, headers))
      expect(r.status, JSON.stringify(headers)).toBe(400)
      expect(r.body.code).toBe('BAD_REQUEST')
      expect(r.body.error).toMatch(msg)
    }
  })

  it('serves Cog-style predictions: /predictions (first model by name) and /models/{m}/predictions', async () => {
    const r = await json(post(e.app, '/predictions', { id: 'cog-1', input: { a: 2, b: 40 } }))
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ id: 'cog-1', status: 'succeeded', input: { a: 2, b: 40 }, output: { sum: 42 } })
    expect(typeof r.body.metrics.predict_time).toBe('number')
    expect(Date.parse(r.body.created_at)).toBeLessThanOrEqual(Date.parse(r.body.completed_at))
    const z = await json(post(e.app, '/models/zulu/predictions', { input: { text: 'hi' } }))
    expect(z.status).toBe(200)
    expect(z.body.output).toBe('HI')
    expect(z.body.id).toMatch(/^[0-9a-f-]{36}$/)
    // defaultModel overrides the discovered one.
    const pinned = createApp({ transport: e.transport, defaultModel: 'zulu', metaTimeoutMs: 60 })
    expect((await json(post(pinned, '/predictions', { input: { text: 'yo' } }))).body.output).toBe('YO')
  })

  it('answers Cog-style schema failures with 422, other faults with their registry status', async () => {
    const schema = await json(post(e.app, '/models/adder/predictions', { input: { a: 'x' } }))
    expect(schema.status).toBe(422)
    expect(schema.body).toEqual({
      error: 'item 0: /a: Expected number',
      code: 'INVALID_INPUT',
      status: 'failed',
      detail: [{ loc: ['body', 'input', 'a'], msg: 'Expected number', type: 'value_error' }],
    })
    const noInput = await json(post(e.app, '/models/adder/predictions', { a: 1 }))
    expect(noInput).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST', error: 'body must be {"input": {...}}' } })
    const notJson = await json(post(e.app, '/models/adder/predictions', '{nope'))
    expect(notJson.status).toBe(400)
    expect(notJson.body.error).toMatch(/^body is not valid JSON/)
    const failed = await json(post(e.app, '/models/adder/predictions', { input: { a: 13 } }))
    expect(failed).toMatchObject({ status: 500, body: { code: 'PREDICTOR_FAILED', error: 'unlucky 13' } })
  })

  it('reports /v2/health/ready 200 with a worker', async () => {
    const r = await json(e.app.request('/v2/health/ready'))
    expect(r).toMatchObject({ status: 200, body: { ready: true, models: 3, workers: 1 } })
  })

  it('counts requests by model and code at /metrics', async () => {
    const registry = new Registry()
    const app = createApp({ transport: e.transport, registry, metaTimeoutMs: 60, extraMetrics: () => '# extra\nextra_metric 7\n' })
    await post(app, '/v2/models/adder/infer', x1([1]))
    await post(app, '/v2/models/adder/infer', x1([2]))
    await post(app, '/v2/models/adder/infer', x1([13]))
    await post(app, '/v2/models/adder/infer', '{bad')
    await post(app, '/v2/models/nobody/infer', x1([1]))
    await post(app, '/models/adder/predictions', { input: { a: 'x' } })
    await post(app, '/models/adder/predictions', { input: { a: 1 } })
    const res = await app.request('/metrics')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe(PROMETHEUS_CONTENT_TYPE)
    const text = await res.text()
    const m = parsePrometheus(text)
    expect(m.get('cohort_requests_total{code="OK",model="adder"}')).toBe(3)
    expect(m.get('cohort_requests_total{code="PREDICTOR_FAILED",model="adder"}')).toBe(1)
    expect(m.get('cohort_requests_total{code="BAD_REQUEST",model="adder"}')).toBe(1)
    expect(m.get('cohort_requests_total{code="INVALID_INPUT",model="adder"}')).toBe(1)
    // Unknown model names share one series, so random names cannot grow memory.
    expect(m.get('cohort_requests_total{code="MODEL_NOT_FOUND",model="_unknown"}')).toBe(1)
    expect(m.get('cohort_requests_total{code="MODEL_NOT_FOUND",model="nobody"}')).toBeUndefined()
    expect(m.get('cohort_request_duration_seconds_count{model="adder"}')).toBe(6)
    expect(m.get('extra_metric')).toBe(7)
    // Non-inference routes are not counted.
    await app.request('/v2')
    expect([...parsePrometheus(await (await app.request('/metrics')).text()).entries()].filter(([k]) => k.startsWith('cohort_requests_total')).reduce((a, [, v]) => a + v, 0)).toBe(
      7,
    )
  })

  it('answers admin routes without a key 401 UNAUTHORIZED and with a wrong key 403 FORBIDDEN', async () => {
    const app = createApp({ transport: e.transport, adminKeys: ['k1'], metaTimeoutMs: 60 })
    const none = await json(app.request('/admin/models/adder/batching'))
    expect(none).toMatchObject({ status: 401, body: { code: 'UNAUTHORIZED' } })
    const wrong = await json(app.request('/admin/models/adder/batching', { headers: { authorization: 'Bearer nope' } }))
    expect(wrong).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } })
    const ok = await app.request('/admin/models/adder/batching', { headers: { authorization: 'Bearer k1' } })
    expect(ok.status).toBe(200)
  })

  it('answers 413 when the body exceeds maxBodyBytes (declared or streamed) and keeps serving', async () => {
    const app = createApp({ transport: e.transport, maxBodyBytes: 200 })
    const big = JSON.stringify(x1(new Array(100).fill(1.5)))
    expect(big.length).toBeGreaterThan(200)
    // No Content-Length: the body is read up to the limit.
    const streamed = await json(post(app, '/v2/models/adder/infer', big))
    expect(streamed).toMatchObject({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE', error: 'request body exceeds the limit of 200 bytes' } })
    // Declared Content-Length: refused before reading.
    const declared = await json(post(app, '/v2/models/adder/infer', big, { 'content-length': String(big.length) }))
    expect(declared.status).toBe(413)
    expect(declared.body.error).toBe(`request body of ${big.length} bytes exceeds the limit of 200 bytes`)
    const cog = await json(post(app, '/models/adder/predictions', { input: { a: 1, pad: 'z'.repeat(300) } }))
    expect(cog).toMatchObject({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } })
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 5; i++) c.enqueue(new TextEncoder().encode(' '.repeat(60)))
        c.close()
      },
    })
    const chunked = await app.request('/v2/models/adder/infer', { method: 'POST', body: stream, duplex: 'half' } as RequestInit)
    expect(chunked.status).toBe(413)
    expect((await json(post(app, '/v2/models/adder/infer', x1([4])))).status).toBe(200)
  })
})

describe('gateway app: bus limits and overload', () => {
  it('answers 413 PAYLOAD_TOO_LARGE when the encoded message exceeds the transport maxMessageBytes', async () => {
    const e = await env({ maxMessageBytes: 2048 })
    const r = await json(post(e.app, '/v2/models/adder/infer', x1(Array.from({ length: 400 }, (_, i) => i + 0.5))))
    expect(r.status).toBe(413)
    expect(r.body.code).toBe('PAYLOAD_TOO_LARGE')
    expect(r.body.error).toMatch(/^encoded request of \d+ bytes exceeds the bus limit \(maxMessageBytes\) of 2048 bytes$/)
    expect((await json(post(e.app, '/v2/models/adder/infer', x1([1])))).status).toBe(200)
  })

  it('answers 413 RESPONSE_TOO_LARGE when the reply would exceed the transport maxMessageBytes', async () => {
    const e = await env({ maxMessageBytes: 2048 })
    const r = await json(post(e.app, '/models/pad/predictions', { input: { n: 5000 } }))
    expect(r.status).toBe(413)
    expect(r.body.code).toBe('RESPONSE_TOO_LARGE')
    expect(r.body.error).toMatch(/bus limit \(maxMessageBytes\) of 2048 bytes/)
    expect((await json(post(e.app, '/models/pad/predictions', { input: { n: 3 } }))).body.output).toBe('ppp')
  })

  it('answers 413 TOO_MANY_ITEMS without Retry-After when the request alone has more rows than the worker queue bound', async () => {
    const e = await env({ maxQueue: 1 })
    const r = await json(post(e.app, '/v2/models/adder/infer', x1([1, 2])))
    expect(r.status).toBe(413)
    expect(r.body).toEqual({ error: 'request holds 2 items (rows); model "adder" queues at most 1 (maxQueue): split it into requests of at most 1', code: 'TOO_MANY_ITEMS' })
    expect(r.headers.get('retry-after')).toBeNull()
  })

  it('changes autoBatchSize at runtime through the admin route and shows the live batch cap', async () => {
    const e = await env({})
    const app = createApp({ transport: e.transport, adminKeys: ['k1'] })
    const req = (method: string, body?: unknown) =>
      app.request('/admin/models/adder/batching', {
        method,
        headers: { 'content-type': 'application/json', authorization: 'Bearer k1' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    expect((await req('PUT', { autoBatchSize: 'yes' })).status).toBe(400)
    expect((await req('PUT', { autoBatchSize: true, maxBatchSize: 8 })).status).toBe(200)
    let live: Record<string, unknown> = {}
    for (let i = 0; i < 100 && live['batchCap'] !== 8; i++) {
      live = (await json(req('GET'))).body.live
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(live).toMatchObject({ maxBatchSize: 8, autoBatchSize: true, batchCap: 8 })
  })
})

describe('gateway app without workers', () => {
  it('answers 503 NO_WORKER (Retry-After) for a known but unserved model, 404 for an unknown one', async () => {
    const e = await env({ models: 'none' })
    await e.transport.directory.announce('ghost', encodeValue({ name: 'ghost' }))
    for (const r of [
      await json(post(e.app, '/v2/models/ghost/infer', x1([1]))),
      await json(e.app.request('/v2/models/ghost')),
      await json(e.app.request('/v2/models/ghost/ready')),
      await json(post(e.app, '/models/ghost/predictions', { input: {} })),
    ]) {
      expect(r.status).toBe(503)
      expect(r.body).toEqual({ error: 'no worker is serving model "ghost" right now', code: 'NO_WORKER' })
      expect(r.headers.get('retry-after')).toBe('1')
    }
    for (const r of [await json(post(e.app, '/v2/models/nobody/infer', x1([1]))), await json(e.app.request('/v2/models/nobody'))]) {
      expect(r.status).toBe(404)
      expect(r.body).toEqual({ error: 'model "nobody" is not served by any worker', code: 'MODEL_NOT_FOUND' })
      expect(r.headers.get('retry-after')).toBeNull()
    }
  })

  it('reports /v2/health/ready 503 and /predictions 503 when no worker serves anything', async () => {
    const e = await env({ models: 'none' })
    const ready = await json(e.app.request('/v2/health/ready'))
    expect(ready).toMatchObject({ status: 503, body: { ready: false, models: 0, workers: 0 } })
    expect((await json(e.app.request('/v2/models'))).body).toEqual({ models: [] })
    const cog = await json(post(e.app, '/predictions', { input: { a: 1 } }))
    expect(cog.status).toBe(503)
    expect(cog.body).toEqual({ error: 'no model is being served', code: 'NO_WORKER' })
    expect(cog.headers.get('retry-after')).toBe('1')
    expect((await json(e.app.request('/v2/health/live'))).status).toBe(200)
  })

  it('reports not ready while a worker says its model is still loading', async () => {
    const e = await env({ models: 'none' })
    const sub = e.transport.subscribe(subj.discover())
    void (async () => {
      for await (const m of sub) {
        m.respond(encodeValue({ worker: 'w1', models: [{ name: 'slow', versions: ['1'], ready: false, inputs: [], outputs: [] }] }))
      }
    })()
    const r = await json(e.app.request('/v2/health/ready'))
    expect(r).toMatchObject({ status: 503, body: { ready: false, models: 1, workers: 1 } })
    sub.unsubscribe()
  })

  it('answers 500 INTERNAL for unexpected failures and reports them once', async () => {
    const inner = new InProcessTransport()
    const reported: unknown[] = []
    // A transport that fails with something that is not a CohortError.
    const broken = Object.create(inner) as InProcessTransport
    broken.request = () => Promise.reject(new TypeError('boom'))
    const app = createApp({ transport: broken, metaTimeoutMs: 40, onUnexpectedError: (err) => reported.push(err) })
    const r = await json(app.request('/v2/models/demo'))
    expect(r.status).toBe(500)
    expect(r.body).toEqual({ error: 'internal error', code: 'INTERNAL' })
    expect(reported).toHaveLength(1)
    expect(reported[0]).toBeInstanceOf(TypeError)
    expect(reported[0]).not.toBeInstanceOf(CohortError)
    await inner.close()
  })

  it('answers 500 INTERNAL (not 400) when a worker replies with garbage', async () => {
    const transport = new InProcessTransport()
    const app = createApp({ transport })
    const sub = transport.subscribe(subj.infer('junk'))
    void (async () => {
      for await (const m of sub) {
        m.respond(new Uint8Array([0x93, 1, 2, 3]))
      }
    })()
    const r = await json(
      app.request('/v2/models/junk/infer', {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] }),
      }),
    )
    expect(r.status).toBe(500)
    expect(r.body.code).toBe('INTERNAL')
    expect(r.body.error).toMatch(/unreadable reply/)
    sub.unsubscribe()
    await transport.close()
  })

  it('ignores a worker whose discovery answer is unreadable', async () => {
    const transport = new InProcessTransport()
    const app = createApp({ transport, metaTimeoutMs: 40 })
    const sub = transport.subscribe(subj.discover())
    void (async () => {
      for await (const m of sub) {
        m.respond(encodeValue({ models: 5 }))
      }
    })()
    const r = await json(app.request('/v2/models'))
    expect(r.status).toBe(200)
    expect(r.body).toEqual({ models: [] })
    sub.unsubscribe()
    await transport.close()
  })
})

describe('gateway app with hand-written responders', () => {
  let transport: InProcessTransport
  let app: Hono
  const stops: (() => void)[] = []
  beforeAll(() => {
    transport = new InProcessTransport()
    app = createApp({ transport, requestTimeoutMs: 10_000, metaTimeoutMs: 60 })
  })
  afterEach(() => {
    for (const s of stops.splice(0)) s()
  })
  afterAll(async () => {
    await transport.close()
  })
  const fake = (model: string, reply: (req: InferRequest) => InferReply | undefined) => {
    const r = responder(transport, model, reply)
    stops.push(r.stop)
    return r
  }

  it('effectiveTimeoutMs: a request may shorten the server limit, never extend it', () => {
    expect(effectiveTimeoutMs(30_000, undefined, undefined)).toBe(30_000)
    expect(effectiveTimeoutMs(30_000, '', undefined)).toBe(30_000)
    expect(effectiveTimeoutMs(30_000, '250', undefined)).toBe(250)
    expect(effectiveTimeoutMs(30_000, '12.5', undefined)).toBe(12.5)
    expect(effectiveTimeoutMs(30_000, '60000', undefined)).toBe(30_000)
    // parameters.timeout is in microseconds (as in Triton); 0 means "no request timeout".
    expect(effectiveTimeoutMs(30_000, undefined, 2_000_000)).toBe(2_000)
    expect(effectiveTimeoutMs(30_000, undefined, 500)).toBe(0.5)
    expect(effectiveTimeoutMs(30_000, undefined, 0)).toBe(30_000)
    expect(effectiveTimeoutMs(30_000, undefined, 90_000_000)).toBe(30_000)
    // Both given: the shorter wins.
    expect(effectiveTimeoutMs(30_000, '100', 2_000_000)).toBe(100)
    expect(effectiveTimeoutMs(30_000, '5000', 2_000_000)).toBe(2_000)
    for (const h of ['0', '-5', 'abc', 'Infinity', 'NaN', ' ']) {
      expect(() => effectiveTimeoutMs(30_000, h, undefined), h).toThrow(CohortError)
      expect(() => effectiveTimeoutMs(30_000, h, undefined), h).toThrow(/x-cohort-timeout-ms must be a positive number/)
    }
    for (const p of [-1, '100', Number.NaN, Number.POSITIVE_INFINITY, null, {}]) {
      expect(() => effectiveTimeoutMs(30_000, undefined, p), typeof p === 'number' || typeof p === 'string' ? String(p) : JSON.stringify(p)).toThrow(
        /parameters.timeout must be a non-negative number/,
      )
    }
  })

  it('puts the effective deadline in the request the worker sees', async () => {
    const probe = fake('probe', echo)
    const cases: [Record<string, string>, unknown, number][] = [
      [{}, undefined, 10_000],
      [{}, 2_000_000, 2_000],
      [{}, 100_000_000, 10_000],
      [{ 'x-cohort-timeout-ms': '500' }, undefined, 500],
      [{ 'x-cohort-timeout-ms': '20000' }, undefined, 10_000],
      [{ 'x-cohort-timeout-ms': '700' }, 300_000, 300],
      [{ 'x-cohort-timeout-ms': '300' }, 700_000, 300],
    ]
    for (const [headers, timeout, want] of cases) {
      const before = Date.now()
      const body = { ...x1([1]), ...(timeout !== undefined ? { parameters: { timeout } } : {}) }
      const r = await post(app, '/v2/models/probe/infer', body, headers)
      const after = Date.now()
      expect(r.status).toBe(200)
      const dl = probe.seen.at(-1)!.deadline
      expect(dl, JSON.stringify([headers, timeout])).toBeGreaterThanOrEqual(before + want)
      expect(dl, JSON.stringify([headers, timeout])).toBeLessThanOrEqual(after + want)
    }
    // Cog-style: the header only.
    const before = Date.now()
    await post(app, '/models/probe/predictions', { input: 1 }, { 'x-cohort-timeout-ms': '1234' })
    const dl = probe.seen.at(-1)!.deadline
    expect(dl).toBeGreaterThanOrEqual(before + 1234)
    expect(dl).toBeLessThanOrEqual(Date.now() + 1234)
    // Bad values are 400s, and nothing is sent.
    const n = probe.seen.length
    const bad = await json(post(app, '/v2/models/probe/infer', { ...x1([1]), parameters: { timeout: 'soon' } }))
    expect(bad).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST' } })
    const badHeader = await json(post(app, '/models/probe/predictions', { input: 1 }, { 'x-cohort-timeout-ms': '-1' }))
    expect(badHeader).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST' } })
    expect(probe.seen.length).toBe(n)
  })

  it('answers 504 when no reply comes before the deadline, and tells the workers to drop the request', async () => {
    const silent = fake('silent', () => undefined)
    const cancels: string[] = []
    const sub = transport.subscribe(subj.cancel('silent'))
    stops.push(() => sub.unsubscribe())
    void (async () => {
      for await (const m of sub) cancels.push(decodeCancel(m.data).id)
    })()
    const t0 = Date.now()
    const r = await json(post(app, '/v2/models/silent/infer', x1([1]), { 'x-cohort-timeout-ms': '30' }))
    expect(Date.now() - t0).toBeLessThan(1_000)
    expect(r.status).toBe(504)
    expect(r.body.code).toBe('DEADLINE_EXCEEDED')
    await new Promise((res) => setTimeout(res, 5))
    expect(cancels).toEqual([silent.seen[0]!.id])
  })

  it('answers 499 CANCELLED when the client goes away, and publishes a cancel notice', async () => {
    const silent = fake('silent2', () => undefined)
    const cancels: string[] = []
    const sub = transport.subscribe(subj.cancel('silent2'))
    stops.push(() => sub.unsubscribe())
    void (async () => {
      for await (const m of sub) cancels.push(decodeCancel(m.data).id)
    })()
    const ac = new AbortController()
    const pending = app.request(
      new Request('http://localhost/v2/models/silent2/infer', {
        method: 'POST',
        body: JSON.stringify(x1([1])),
        signal: ac.signal,
      }),
    ) as Promise<Response>
    for (let i = 0; i < 50 && silent.seen.length === 0; i++) await new Promise((res) => setTimeout(res, 2))
    expect(silent.seen).toHaveLength(1)
    ac.abort()
    const r = await json(pending)
    expect(r.status).toBe(499)
    expect(r.body.code).toBe('CANCELLED')
    await new Promise((res) => setTimeout(res, 5))
    expect(cancels).toEqual([silent.seen[0]!.id])
  })

  it('uses the status of the first failed item (in item order) for the response', async () => {
    const errs: (WireError | null)[][] = []
    fake('mixed', (req) => ({ v: 1, id: req.id, errors: errs.shift()! }))
    const E = (code: string, message = code.toLowerCase()) => ({ code, message })
    const cases: [(WireError | null)[], number, string][] = [
      [[null, E('INVALID_INPUT'), E('PREDICTOR_FAILED')], 400, 'INVALID_INPUT'],
      [[null, E('PREDICTOR_FAILED'), E('INVALID_INPUT')], 500, 'PREDICTOR_FAILED'],
      [[E('DEADLINE_EXCEEDED'), null, null], 504, 'DEADLINE_EXCEEDED'],
      [[null, null, E('CANCELLED')], 499, 'CANCELLED'],
      [[null, E('SHUTTING_DOWN'), E('OVERLOADED')], 503, 'SHUTTING_DOWN'],
      [[null, E('NO_SUCH_CODE', 'odd'), null], 500, 'INTERNAL'],
    ]
    for (const [list, status, code] of cases) {
      errs.push(list)
      const r = await json(post(app, '/v2/models/mixed/infer', x1([1, 2, 3])))
      expect(r.status, JSON.stringify(list)).toBe(status)
      expect(r.body.code).toBe(code)
      // Errors about the item name it (issue 16); capacity and timing errors keep their message.
      const first = list.find((x) => x !== null)!.message
      expect(r.body.error).toBe(status === 500 || status < 499 ? `item ${list.findIndex((x) => x !== null)}: ${first}` : first)
      // Only OVERLOADED / NO_WORKER carry Retry-After.
      expect(r.headers.get('retry-after')).toBeNull()
    }
    errs.push([null, E('OVERLOADED', 'full'), null])
    const busy = await json(post(app, '/models/mixed/predictions', { input: 1 }))
    expect(busy).toMatchObject({ status: 503, body: { code: 'OVERLOADED', error: 'full' } })
    expect(busy.headers.get('retry-after')).toBe('1')
  })

  it('answers a whole-request error reply with its code', async () => {
    fake('broken', (req) => ({ v: 1, id: req.id, error: { code: 'NOT_READY', message: 'still loading' } }))
    const r = await json(post(app, '/v2/models/broken/infer', x1([1])))
    expect(r).toMatchObject({ status: 503, body: { error: 'still loading', code: 'NOT_READY' } })
  })

  it('returns binary data both ways byte for byte (BYTES, INT32, BOOL), per-output binary_data in requested order', async () => {
    const bus = fake('echo', echo)
    const strs = encodeBytesElements(['héllo', '', 'x'])
    const ints = bytesOf(new Int32Array([-1, 2, 2147483647]))
    const head = new TextEncoder().encode(
      JSON.stringify({
        id: 'bin-1',
        inputs: [
          { name: 's', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: strs.byteLength } },
          { name: 'i', datatype: 'INT32', shape: [3], parameters: { binary_data_size: 12 } },
          { name: 'b', datatype: 'BOOL', shape: [3], data: [true, false, true] },
        ],
        outputs: [{ name: 'b', parameters: { binary_data: true } }, { name: 'i' }, { name: 's', parameters: { binary_data: true } }],
      }),
    )
    const res = await post(app, '/v2/models/echo/infer', concat(head, strs, ints), {
      'inference-header-content-length': String(head.byteLength),
    })
    expect(res.status).toBe(200)
    expect(bus.seen[0]!.outputs).toEqual(['b', 'i', 's'])
    const { head: h, rest } = await binaryParts(res)
    expect(h).toMatchObject({ model_name: 'echo', model_version: '1', id: 'bin-1' })
    expect(h.outputs).toEqual([
      { name: 'b', datatype: 'BOOL', shape: [3], parameters: { binary_data_size: 3 } },
      { name: 'i', datatype: 'INT32', shape: [3], data: [-1, 2, 2147483647] },
      { name: 's', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: strs.byteLength } },
    ])
    // Binary outputs follow the header in the order listed: b, then s.
    expect(Array.from(rest)).toEqual([1, 0, 1, ...strs])
  })

  it('binary_data_output makes every output binary, in the order the worker returned them', async () => {
    fake('echo2', echo)
    const res = await post(app, '/v2/models/echo2/infer', {
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'f', datatype: 'FP32', shape: [2], data: [0.5, -2] },
        { name: 'u', datatype: 'UINT16', shape: [2], data: [1, 65535] },
      ],
    })
    expect(res.headers.get('content-type')).toBe('application/octet-stream')
    const { head, rest } = await binaryParts(res)
    expect(head.outputs).toEqual([
      { name: 'f', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } },
      { name: 'u', datatype: 'UINT16', shape: [2], parameters: { binary_data_size: 4 } },
    ])
    expect(Array.from(rest)).toEqual([...bytesOf(new Float32Array([0.5, -2])), ...bytesOf(new Uint16Array([1, 65535]))])
    // Without binary_data_output and without binary_data: plain JSON.
    const plain = await post(app, '/v2/models/echo2/infer', x1([1]))
    expect(plain.headers.get('content-type')).toMatch(/application\/json/)
    expect(plain.headers.get('inference-header-content-length')).toBeNull()
  })

  it('echoes the OIP id, and otherwise uses the id of the bus request', async () => {
    const bus = fake('ids', echo)
    const withId = await json(post(app, '/v2/models/ids/infer', { id: 'client-id', ...x1([1]) }))
    expect(withId.body.id).toBe('client-id')
    expect(bus.seen[0]!.id).not.toBe('client-id')
    const without = await json(post(app, '/v2/models/ids/infer', x1([1])))
    expect(without.body.id).toBe(bus.seen[1]!.id)
    const cog = await json(post(app, '/models/ids/predictions', { id: 'cog-id', input: { q: 1 } }))
    expect(cog.body).toMatchObject({ id: 'cog-id', status: 'succeeded', output: { q: 1 } })
    expect(bus.seen[2]!.items).toEqual([{ q: 1 }])
  })
})
