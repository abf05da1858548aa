// The admin batching route over an InProcessTransport with a real CohortWorker: patches are
// checked against @cohort/batching's field table only, and every accepted change leaves an audit line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import type { LogFields, Logger } from '@cohort/observability'
import { createApp } from '../app.ts'

const echo = definePredictor({
  name: 'echo',
  input: Type.Object({ a: Type.Number() }),
  predict: (xs) => xs.map((x) => x.a),
})

const lines: { level: string; fields: LogFields; msg: string }[] = []
const logger: Logger = {
  debug: () => {},
  info: (fields, msg) => lines.push({ level: 'info', fields, msg }),
  warn: (fields, msg) => lines.push({ level: 'warn', fields, msg }),
  error: (fields, msg) => lines.push({ level: 'error', fields, msg }),
}

let transport: InProcessTransport
let worker: CohortWorker
let app: Hono
const unexpected: unknown[] = []

beforeAll(async () => {
  transport = new InProcessTransport()
  worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)], logger: { ...logger, info: () => {} } })
  await worker.start()
  app = createApp({ transport, adminKeys: ['first-key', 'second-key'], metaTimeoutMs: 500, logger, onUnexpectedError: (e) => unexpected.push(e) })
})

afterAll(async () => {
  await worker.drain()
  await transport.close()
  expect(unexpected).toEqual([])
})

function put(body: string, key = 'second-key'): Promise<Response> {
  return app.request('/admin/models/echo/batching', {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
  }) as Promise<Response>
}

describe('PUT /admin/models/{m}/batching', () => {
  it.each(['toString', 'constructor', 'valueOf', '__proto__', 'hasOwnProperty'])(
    'answers 400 naming the unknown setting for the inherited name %s, and stores nothing',
    async (k) => {
      const r = await put(`{"${k}": 1}`)
      expect(r.status).toBe(400)
      expect(await r.json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining(`unknown batching setting "${k}"`) })
      expect(await transport.config.get('echo')).toBeUndefined()
    },
  )

  it('answers 400 past the table bounds (maxBatchSize 65,537), naming the range', async () => {
    const r = await put('{"maxBatchSize": 65537}')
    expect(r.status).toBe(400)
    expect((await r.json()).error).toMatch(/maxBatchSize: 65537 \(expected an integer from 1 to 65536\)/)
    expect((await put('{"maxQueue": 1e9}')).status).toBe(400)
    expect(await transport.config.get('echo')).toBeUndefined()
  })

  it('stores a valid patch, the worker follows it, and one audit line says who, what, before and after', async () => {
    lines.length = 0
    const r = await put('{"maxBatchSize": 7, "maxBatchCost": 12}')
    expect(r.status).toBe(200)
    expect(await r.json()).toEqual({ model: 'echo', stored: { maxBatchSize: 7, maxBatchCost: 12 } })
    const r2 = await put('{"maxBatchCost": null}', 'first-key')
    expect(await r2.json()).toEqual({ model: 'echo', stored: { maxBatchSize: 7, maxBatchCost: null } })
    const audit = lines.filter((l) => l.fields['audit'] === 'admin.batching')
    expect(audit).toHaveLength(2)
    expect(audit[0]!.fields).toMatchObject({
      who: 'admin key #2',
      model: 'echo',
      patch: { maxBatchSize: 7, maxBatchCost: 12 },
      before: {},
      after: { maxBatchSize: 7, maxBatchCost: 12 },
    })
    expect(audit[1]!.fields).toMatchObject({
      who: 'admin key #1',
      patch: { maxBatchCost: null },
      before: { maxBatchSize: 7, maxBatchCost: 12 },
      after: { maxBatchSize: 7, maxBatchCost: null },
    })
    // Never the key itself.
    expect(JSON.stringify(audit)).not.toContain('second-key')
    // The worker applied it (null: no cost limit), as GET's live view shows.
    const g = await app.request('/admin/models/echo/batching', { headers: { authorization: 'Bearer first-key' } })
    expect((await g.json()).live).toEqual({
      maxBatchSize: 7,
      maxDelayMs: expect.any(Number),
      policy: 'eager',
      maxQueue: 4096,
      maxBatchCost: null,
      admission: true,
      autoBatchSize: false,
      sloMs: 0,
      maxTenantQueue: 0,
      batchCap: 7,
    })
  })

  it('writes no audit line for a refused patch', async () => {
    lines.length = 0
    expect((await put('{"policy": "lifo"}')).status).toBe(400)
    expect((await put('{"policy": "timer"}', 'wrong')).status).toBe(403)
    expect(lines.filter((l) => l.fields['audit'])).toEqual([])
  })
})
