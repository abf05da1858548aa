// Cog-style predictions end to end through `cohort serve`: over real NATS (async jobs in JetStream)
// and embedded (async held in memory), with webhooks received by a local HTTP listener; the bulk
// API as JSON, NDJSON and SSE; /health-check, /openapi.json and --default-model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  SLEEPY_PREDICTOR,
  getJson,
  postJson,
  readSleepyLog,
  sleepyLogPath,
  spawnCohort,
  startNatsServer,
  waitRunning,
  webhookReceiver,
  type CliProcess,
  type NatsServerHandle,
  ifStarted,
} from '@cohort/test-support'

const LOG = sleepyLogPath()

async function until<T>(f: () => T | undefined | false, ms = 30_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v !== undefined && v !== false) {
      return v
    }
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function serve(args: string[]): Promise<{ p: CliProcess; url: string }> {
  const p = spawnCohort(['serve', '--port', '0', ...args], { SLEEPY_MS: '20', SLEEPY_LOG: LOG })
  const m = await p.waitFor(/serving .* on (http:\/\/\S+)/, 90_000)
  return { p, url: m[1]! }
}

/** One async prediction with a webhook: 202 at once, then start, output, completed at the listener. */
async function asyncRoundTrip(url: string, hooks: Awaited<ReturnType<typeof webhookReceiver>>, path: string, input: unknown) {
  const r = await postJson(`${url}${path}`, { input, webhook: hooks.url }, { prefer: 'respond-async' })
  expect(r.status).toBe(202)
  expect(r.body.status).toBe('starting')
  const id = r.body.id as string
  await until(() => hooks.got.some((h) => h.body.id === id && h.event === 'completed'))
  const events = hooks.got.filter((h) => h.body.id === id)
  expect(events.map((h) => h.event)).toEqual(['start', 'output', 'completed'])
  expect(events[0]!.body.status).toBe('processing')
  const final = events[2]!.body
  expect(final.status).toBe('succeeded')
  expect((await getJson(`${url}/predictions/${id}`)).body).toEqual(final)
  return final
}

describe('Cog-style API over NATS (cohort serve --nats)', () => {
  let nats: NatsServerHandle
  let srv: { p: CliProcess; url: string }
  let hooks: Awaited<ReturnType<typeof webhookReceiver>>

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: true })
    hooks = await webhookReceiver('/hook')
    srv = await serve(['--nats', nats.url, '--predictor', SLEEPY_PREDICTOR, '--model', 'demo', '--default-model', 'sleepy', '--max-bulk-inputs', '5'])
  }, 120_000)

  afterAll(async () => {
    const p = ifStarted(srv)?.p
    await p?.stop('SIGKILL').catch(() => undefined)
    ifStarted(hooks)?.server.close()
    await ifStarted(nats)?.stop()
  })

  it('runs an async prediction through JetStream with webhooks, on the default model', async () => {
    const final = await asyncRoundTrip(srv.url, hooks, '/predictions', { x: 3 })
    expect(final).toMatchObject({ model: 'sleepy', output: { y: 6 }, attempts: 1 })
  }, 60_000)

  it('runs Cog predictions on an ONNX model: one item per input name, no batch dim', async () => {
    const input = { input: Array.from({ length: 256 }, (_, i) => i / 256) }
    const sync = await postJson(`${srv.url}/models/demo/predictions`, { input })
    expect(sync.status).toBe(200)
    expect(sync.body.output.logits).toHaveLength(10)
    const final = await asyncRoundTrip(srv.url, hooks, '/models/demo/predictions', input)
    expect(final.output).toEqual(sync.body.output)
    const bad = await postJson(`${srv.url}/models/demo/predictions`, { input: { input: [1, 2] } })
    expect(bad.status).toBe(422)
    expect(bad.body.detail[0].loc.slice(0, 2)).toEqual(['body', 'input'])
  }, 60_000)

  it('answers /health-check and /openapi.json for the default model', async () => {
    expect((await getJson(`${srv.url}/health-check`)).body).toMatchObject({ status: 'READY', setup: { status: 'succeeded' } })
    const o = (await getJson(`${srv.url}/openapi.json`)).body
    expect(o.components.schemas.Input.properties.x).toEqual({ type: 'number' })
    expect(o.components.schemas.Output.properties.y).toEqual({ type: 'number' })
    expect(o.components.schemas.Input_demo.properties.input).toMatchObject({ type: 'array', minItems: 256, maxItems: 256 })
  })

  it('bulk: results in input order as JSON, a bad item fails alone, too many inputs is 413', async () => {
    const inputs = [{ x: 1 }, { x: 'bad' }, { x: 3, sleepMs: 200 }, { x: 4 }]
    const r = await postJson(`${srv.url}/models/sleepy/predictions/bulk`, { inputs })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ model: 'sleepy', total: 4, succeeded: 3, failed: 1 })
    expect(r.body.results.map((x: { index: number; status: string; output?: { y?: unknown }; code?: string }) => [x.index, x.status, x.output?.y ?? x.code])).toEqual([
      [0, 'succeeded', 2],
      [1, 'failed', 'INVALID_INPUT'],
      [2, 'succeeded', 6],
      [3, 'succeeded', 8],
    ])
    const big = await postJson(`${srv.url}/models/sleepy/predictions/bulk`, { inputs: Array.from({ length: 6 }, (_, x) => ({ x })) })
    expect(big).toMatchObject({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } })
  }, 60_000)

  it('bulk: streams NDJSON and SSE as items complete, each with its index', async () => {
    // The bad item fails at once (schema check before batching); the others take >= 600 ms.
    const inputs = [{ x: 1, sleepMs: 600 }, { x: 'bad' }, { x: 3, sleepMs: 600 }]
    const nd = await fetch(`${srv.url}/models/sleepy/predictions/bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ inputs }),
    })
    expect(nd.headers.get('content-type')).toMatch(/application\/x-ndjson/)
    const lines = (await nd.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.index).sort()).toEqual([0, 1, 2])
    expect(lines[0]).toMatchObject({ index: 1, status: 'failed' }) // as completed, not in input order
    expect(lines.find((l) => l.index === 1)).toMatchObject({ status: 'failed', code: 'INVALID_INPUT' })
    const sse = await fetch(`${srv.url}/models/sleepy/predictions/bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ inputs }),
    })
    expect(sse.headers.get('content-type')).toMatch(/text\/event-stream/)
    const events = (await sse.text()).trim().split('\n\n')
    expect(events.at(-1)).toBe('event: done\ndata: {"total":3}')
    const data = events.slice(0, -1).map((e) => {
      const [ev, d] = e.split('\n')
      expect(ev).toBe('event: prediction')
      return JSON.parse(d!.replace(/^data: /, ''))
    })
    expect(data.map((d) => d.index).sort()).toEqual([0, 1, 2])
    expect(data[0].index).toBe(1)
    expect(data.find((d) => d.index === 2)).toMatchObject({ status: 'succeeded', output: { y: 6 } })
  }, 60_000)
})

describe('Cog-style async predictions embedded (in memory, no NATS)', () => {
  let srv: { p: CliProcess; url: string }
  let hooks: Awaited<ReturnType<typeof webhookReceiver>>

  beforeAll(async () => {
    hooks = await webhookReceiver('/hook')
    srv = await serve(['--predictor', SLEEPY_PREDICTOR])
  }, 120_000)

  afterAll(async () => {
    const p = ifStarted(srv)?.p
    await p?.stop('SIGKILL').catch(() => undefined)
    ifStarted(hooks)?.server.close()
  })

  it('runs async predictions with webhooks, idempotent PUT and cancel', async () => {
    const final = await asyncRoundTrip(srv.url, hooks, '/predictions', { x: 5 })
    expect(final.output).toEqual({ y: 10, batch: 1 })
    const put = (body: unknown) =>
      fetch(`${srv.url}/predictions/emb-1`, { method: 'PUT', headers: { 'content-type': 'application/json', prefer: 'respond-async' }, body: JSON.stringify(body) }).then(
        async (r) => ({ status: r.status, body: await r.json() }),
      )
    const [a, b] = await Promise.all([put({ input: { x: 41, sleepMs: 1500 } }), put({ input: { x: 41, sleepMs: 1500 } })])
    expect([a.status, b.status]).toEqual([202, 202])
    expect(a.body.created_at).toBe(b.body.created_at)
    await waitRunning(LOG, 41)
    const c = await postJson(`${srv.url}/predictions/emb-1/cancel`, {})
    expect(c).toMatchObject({ status: 200, body: { id: 'emb-1', status: 'canceled' } })
    // The running batch ends and a later request is answered: the late result was not stored.
    await until(() => readSleepyLog(LOG).some((e) => e.event === 'end' && e.xs.includes(41)))
    expect((await postJson(`${srv.url}/predictions`, { input: { x: 42 } })).status).toBe(200)
    expect((await getJson(`${srv.url}/predictions/emb-1`)).body).toMatchObject({ status: 'canceled', output: null })
    expect(
      readSleepyLog(LOG).filter((e) => e.event === 'start' && e.xs.includes(41)),
      'one prediction for the two PUTs',
    ).toHaveLength(1)
  }, 60_000)
})
