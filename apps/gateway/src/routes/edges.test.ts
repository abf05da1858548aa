// Edge inputs through createApp and a real CohortWorker (in-process): too-deep Cog inputs and
// numbers beyond the double range get clear 4xx answers, never 500.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { MAX_VALUE_DEPTH } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '../app.ts'

const anyx = definePredictor({ name: 'anyx', input: Type.Object({ a: Type.Any() }), predict: (xs) => xs.map(() => 1) })
const num = definePredictor({ name: 'num', input: Type.Object({ a: Type.Number() }), predict: (xs) => xs.map((x) => x.a) })

let transport: InProcessTransport
let worker: CohortWorker
let app: Hono
const unexpected: unknown[] = []

beforeAll(async () => {
  transport = new InProcessTransport()
  worker = new CohortWorker({ transport, runners: [new PredictorRunner(anyx), new PredictorRunner(num)] })
  await worker.start()
  app = createApp({ transport, onUnexpectedError: (e) => unexpected.push(e) })
})

afterAll(async () => {
  await worker.drain()
  await transport.close()
  expect(unexpected).toEqual([])
})

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  app.request(path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } }) as Promise<Response>
/** A Cog body whose input nests `d` levels in all (the input object is one). */
const deep = (d: number) => `{"input":{"a":${'['.repeat(d - 1)}${']'.repeat(d - 1)}}}`

describe('too-deep Cog inputs', () => {
  it(`serves an input exactly ${MAX_VALUE_DEPTH} levels deep`, async () => {
    const r = await post('/models/anyx/predictions', deep(MAX_VALUE_DEPTH))
    expect(r.status).toBe(200)
  })

  it.each([MAX_VALUE_DEPTH + 1, 1_000, 2_000, 100_000])('answers 422 with Cog detail for an input %i levels deep (sync and async)', async (d) => {
    const r = await post('/models/anyx/predictions', deep(d))
    expect(r.status).toBe(422)
    expect(await r.json()).toMatchObject({ detail: [{ loc: ['body', 'input'], type: 'value_error.depth', msg: expect.stringContaining(`${MAX_VALUE_DEPTH} levels`) }] })
    const a = await post('/models/anyx/predictions', deep(d), { prefer: 'respond-async' })
    expect(a.status).toBe(422)
  })
})

describe('numbers beyond the double range', () => {
  it.each(['1e400', '-1e400', '1' + '0'.repeat(400)])('answers 400 for %s in a Cog input, naming where', async (lit) => {
    const r = await post('/models/num/predictions', `{"input":{"a":${lit}}}`)
    expect(r.status).toBe(400)
    expect(await r.json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringMatching(/"a" is beyond the double range/) })
  })

  it('answers 400 for 1e400 in OIP tensor data (FP32 and FP64)', async () => {
    for (const datatype of ['FP32', 'FP64']) {
      const r = await post('/v2/models/anyx/infer', JSON.stringify({ inputs: [{ name: 'x', datatype, shape: [2], data: [7, 1] }] }).replace('[7,', '[1e400,'))
      expect(r.status).toBe(400)
      expect((await r.json()).error).toMatch(/beyond the double range/)
    }
  })

  it('keeps large finite numbers and strings that look like exponents', async () => {
    const r = await post('/models/num/predictions', '{"input":{"a":1.5e308}}')
    expect(await r.json()).toMatchObject({ status: 'succeeded', output: 1.5e308 })
    const s = await post('/models/anyx/predictions', '{"input":{"a":"code e400 and 1e999 in text"}}')
    expect(s.status).toBe(200)
  })
})
