// Every refusal says whether retrying can help, per limit, through the HTTP app with a real
// CohortWorker: 503 + Retry-After only when waiting can help; a request that can never be served
// gets a 4xx without Retry-After whose message names the limit and its value (docs/errors.md#refusals-can-retrying-help).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Type, definePredictor } from '@cohort/predictor'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'

let release: () => void = () => undefined
let hold: Promise<void> = Promise.resolve()
const echo = definePredictor({
  name: 'echo',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Number(),
  batch: { maxBatchSize: 64, maxDelayMs: 0 },
  predict: async (xs) => {
    await hold
    return xs.map((v) => v.x)
  },
})

describe('refusals: retryable 503 versus never-servable 4xx', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)], batching: { maxQueue: 4096 } })
  const app = createApp({ transport, workerLoss: false, maxBodyBytes: 2_000_000, maxBulkInputs: 10 })
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    app.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) })
  const rows = (n: number) => ({ inputs: [{ name: 'x', datatype: 'FP64', shape: [n], data: Array.from({ length: n }, (_, i) => i) }] })

  beforeAll(async () => {
    await worker.start()
  })
  afterAll(async () => {
    release()
    await worker.drain()
    await transport.close()
  })

  async function expectNeverServable(r: Response, status: number, code: string, names: RegExp): Promise<void> {
    const j = (await r.json()) as { code: string; error: string }
    expect(r.status, j.error).toBe(status)
    expect(j.code).toBe(code)
    expect(j.error).toMatch(names)
    expect(r.headers.get('retry-after')).toBeNull()
  }

  it('a single request with 40,000 rows against maxQueue 4096 is 413 TOO_MANY_ITEMS, not 503', async () => {
    await expectNeverServable(await post('/v2/models/echo/infer', rows(40_000)), 413, 'TOO_MANY_ITEMS', /40000 items.*at most 4096 \(maxQueue\)/)
  })

  it('a body above maxBodyBytes is 413 PAYLOAD_TOO_LARGE naming the limit', async () => {
    await expectNeverServable(await post('/v2/models/echo/infer', 'x'.repeat(2_000_001)), 413, 'PAYLOAD_TOO_LARGE', /2000000/)
  })

  it('more bulk inputs than maxBulkInputs is 413 naming the bound', async () => {
    const inputs = Array.from({ length: 11 }, (_, i) => ({ x: i }))
    await expectNeverServable(await post('/models/echo/predictions/bulk', { inputs }), 413, 'PAYLOAD_TOO_LARGE', /at most 10 inputs, got 11/)
  })

  it('an unknown output is 400 INVALID_INPUT naming the outputs', async () => {
    const r = await post('/v2/models/echo/infer', { ...rows(1), outputs: [{ name: 'nope' }] })
    await expectNeverServable(r, 400, 'INVALID_INPUT', /no output "nope"/)
  })

  it('a queue full now (a request that fits maxQueue but not the room left) is 503 OVERLOADED with Retry-After', async () => {
    hold = new Promise((r) => {
      release = r
    })
    const server = worker.servers[0]!
    // The held batch teaches the worker's cost model that a batch of 64 takes as long as it was
    // held (longer on a busy machine): with the default 30 s the 63 batches queued behind it would
    // look doomed and be expired unrun. Ten minutes keeps them servable however long the hold.
    const long = { 'x-cohort-timeout-ms': '600000' }
    const running = post('/v2/models/echo/infer', rows(64), long)
    await vi.waitFor(() => expect(server.engine.running).toBe(1), { timeout: 30_000, interval: 2 }) // a bound for a hang only
    const queued = post('/v2/models/echo/infer', rows(4000), long)
    await vi.waitFor(() => expect(server.engine.queued).toBe(4000), { timeout: 30_000, interval: 2 }) // a bound for a hang only
    const r = await post('/v2/models/echo/infer', rows(200))
    const j = (await r.json()) as { code: string; error: string }
    expect(r.status).toBe(503)
    expect(j.code).toBe('OVERLOADED')
    expect(j.error).toMatch(/no room for this request's 200 items now \(maxQueue 4096\)/)
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    release()
    expect((await running).status).toBe(200)
    expect((await queued).status).toBe(200)
  })
})
