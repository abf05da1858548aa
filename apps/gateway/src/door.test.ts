// The inference door through the HTTP app, over an InProcessTransport with a real CohortWorker
// (TypeScript predictor with a schema): item indices in bulk and OIP multi-item errors, the Cog
// conflict of an idempotent PUT, and `x-request-id` / `traceparent` on responses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InMemorySpanExporter, SimpleSpanProcessor, BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { Type, definePredictor, itemError as predictorItemError } from '@cohort/predictor'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import type { InferReply } from '@cohort/protocol'
import { createApp } from './app.ts'
import { itemError } from './door.ts'

const upper = definePredictor({
  name: 'upper',
  input: Type.Object({ text: Type.String() }),
  batch: { maxBatchSize: 8, maxDelayMs: 5 },
  predict: (xs) => xs.map((x) => (x.text === 'boom' ? predictorItemError('boom refused', 'PREDICTOR_FAILED') : x.text.toUpperCase())),
})

const post = (app: ReturnType<typeof createApp>, path: string, body: unknown, headers: Record<string, string> = {}, method = 'POST') =>
  app.request(path, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

describe('itemError', () => {
  const reply = (errors: InferReply['errors']): InferReply => ({ v: 1, id: 'r', worker: 'w', ...(errors ? { errors } : {}) })
  it('names the failing item of a multi-item reply, and corrects the index of a one-item envelope', () => {
    expect(itemError(reply([null, { code: 'PREDICTOR_FAILED', message: 'bad' }]))?.message).toBe('item 1: bad')
    expect(itemError(reply([null, { code: 'INVALID_INPUT', message: 'item 1: /x: Expected string' }]))?.message).toBe('item 1: /x: Expected string')
    expect(itemError(reply([{ code: 'INVALID_INPUT', message: 'item 0: /x: Expected string' }]), 7)?.message).toBe('item 7: /x: Expected string')
    // One item alone: the message as the worker wrote it.
    expect(itemError(reply([{ code: 'PREDICTOR_FAILED', message: 'bad' }]))?.message).toBe('bad')
    // Capacity and timing are not about the item.
    expect(itemError(reply([null, { code: 'OVERLOADED', message: 'queue is full' }]))?.message).toBe('queue is full')
    expect(itemError(reply(undefined))).toBeUndefined()
  })
})

describe('the inference door over HTTP', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(upper)] })
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const app = createApp({ transport, workerLoss: false })
  const traced = createApp({ transport, workerLoss: false, tracer: provider.getTracer('test') })

  beforeAll(async () => {
    await worker.start()
  })
  afterAll(async () => {
    await worker.drain()
    await transport.close()
    await provider.shutdown()
  })

  it('bulk: a bad input at index 1 says "item 1", not the worker\'s "item 0"', async () => {
    const r = await post(app, '/models/upper/predictions/bulk', { inputs: [{ text: 'a' }, { text: 5 }, { text: 'c' }, { wrong: 1 }] })
    expect(r.status).toBe(200)
    const body = (await r.json()) as { results: { index: number; status: string; error?: string; output?: unknown }[] }
    expect(body.results.map((x) => [x.index, x.status])).toEqual([
      [0, 'succeeded'],
      [1, 'failed'],
      [2, 'succeeded'],
      [3, 'failed'],
    ])
    expect(body.results[1]!.error).toBe('item 1: /text: Expected string')
    expect(body.results[3]!.error).toMatch(/^item 3: /)
    expect(body.results[2]!.output).toBe('C')
  })

  it('OIP: one bad item among two fails the request with a message naming that item', async () => {
    const r = await post(app, '/v2/models/upper/infer', { inputs: [{ name: 'text', datatype: 'BYTES', shape: [2], data: ['ok', 'boom'] }] })
    expect(r.status).toBe(500)
    expect(await r.json()).toEqual({ error: 'item 1: boom refused', code: 'PREDICTOR_FAILED' })
  })

  it('PUT /predictions/{id}: the same id with another input is 409 naming the id; the same request again is the prediction', async () => {
    const first = await post(app, '/models/upper/predictions/put-1', { input: { text: 'x' } }, {}, 'PUT')
    expect(first.status).toBe(200)
    expect(await first.json()).toMatchObject({ id: 'put-1', status: 'succeeded', output: 'X' })
    const again = await post(app, '/models/upper/predictions/put-1', { input: { text: 'x' } }, {}, 'PUT')
    expect(again.status).toBe(200)
    expect(await again.json()).toMatchObject({ id: 'put-1', output: 'X' })
    const other = await post(app, '/models/upper/predictions/put-1', { input: { text: 'y' } }, {}, 'PUT')
    expect(other.status).toBe(409)
    const body = (await other.json()) as { code: string; error: string }
    expect(body.code).toBe('CONFLICT')
    expect(body.error).toContain('"put-1"')
    expect(body.error).toContain('different input')
  })

  it("answers x-request-id (echoing the client's) on every response", async () => {
    const mine = await post(app, '/v2/models/upper/infer', { inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], data: ['a'] }] }, { 'x-request-id': 'client-42' })
    expect(mine.status).toBe(200)
    expect(mine.headers.get('x-request-id')).toBe('client-42')
    const own = await post(app, '/v2/models/upper/infer', { inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], data: ['a'] }] })
    expect(own.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    // Errors and other routes too; an unusable client id (control characters, too long) is replaced.
    const err = await app.request('/v2/models/nope!/infer', { method: 'POST', headers: { 'x-request-id': 'x'.repeat(200) }, body: '{}' })
    expect(err.status).toBe(404)
    expect(err.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect((await app.request('/v2/health/live', { headers: { 'x-request-id': 'probe-1' } })).headers.get('x-request-id')).toBe('probe-1')
  })

  it("answers the gateway span as traceparent: a child of the caller's trace, or a new trace with a tracer", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const infer = { inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], data: ['a'] }] }
    const child = await post(app, '/v2/models/upper/infer', infer, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` })
    // No SDK here: the propagated trace context is answered as it came.
    const tp = child.headers.get('traceparent')
    expect(tp).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-0[01]$`))
    const own = await post(traced, '/v2/models/upper/infer', infer)
    const span = exporter.getFinishedSpans().find((s) => s.name === 'cohort.gateway.infer')!
    expect(own.headers.get('traceparent')).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`)
    // Untraced (no SDK, no caller trace): no traceparent to answer.
    expect((await post(app, '/v2/models/upper/infer', infer)).headers.get('traceparent')).toBeNull()
  })
})
