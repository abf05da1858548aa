// The unmodified gateway app (createApp) on edge runtimes, workerd and Bun, reaching a real
// nats-server over websocket; a cohort worker serves the demo model over plain NATS. Each runtime
// answers like the Node gateway: metadata, inference, 404, 400; generative streams (SSE) delivered
// as they are made; and 503 fast once NATS is gone.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  spawnCohort,
  startNatsServer,
  writeModelFixtures,
  type CliProcess,
  type ModelFixtures,
  type NatsServerHandle,
  type JsonBody,
  ifStarted,
  allStarted,
} from '@cohort/test-support'
import { parsePrometheus } from '@cohort/metrics'
import { freePort, startBun, startWorkerd, type RuntimeProcess } from './runtimes.ts'

let nats: NatsServerHandle
let fx: ModelFixtures
let worker: CliProcess
let nodeGw: CliProcess
let nodeBase = ''
let outDir = ''
/** Where the fixture generator writes {running, cancelled, ...} after every step. */
let stateDir = ''
const genState = (): { running: number; cancelled: number } => {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'state.json'), 'utf8')) as { running: number; cancelled: number }
  } catch {
    return { running: 0, cancelled: 0 } // no step yet
  }
}
async function until(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}
const runtimes: Record<string, RuntimeProcess> = {}

/** The char-level fixture generator (a real Generator: one token per step, CHARGEN_STEP_MS per step). */
const CHAR_GENERATOR = new URL('../fixtures/char-generator.ts', import.meta.url).pathname
/** ms per generator step: a 30-token stream takes at least 30 x this. */
const STEP_MS = 20

const input = (rows: number, seed: number) => Array.from({ length: rows * 256 }, (_, i) => Math.fround(Math.sin(i * 0.37 + seed) * 2))

async function call(base: string, path: string, init?: RequestInit): Promise<{ status: number; body: JsonBody; headers: Headers }> {
  const r = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(30_000), ...init })
  const text = await r.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // keep the text
  }
  return { status: r.status, body, headers: r.headers }
}

const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  call(base, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })

/**
 * An SSE body read as it arrives: its `data:` payloads in order (`[DONE]` kept as the string) and
 * the time (performance.now()) of each read that completed at least one event.
 */
async function readSse(r: Response): Promise<{ data: unknown[]; at: number[] }> {
  const reader = r.body!.getReader()
  const dec = new TextDecoder()
  const data: unknown[] = []
  const at: number[] = []
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) {
      break
    }
    const t = performance.now()
    buf += dec.decode(value, { stream: true })
    let got = false
    for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
      const line = buf
        .slice(0, i)
        .split('\n')
        .find((l) => l.startsWith('data: '))
      buf = buf.slice(i + 2)
      if (line) {
        const d = line.slice(6)
        data.push(d === '[DONE]' ? d : JSON.parse(d))
        got = true
      }
    }
    if (got) {
      at.push(t)
    }
  }
  expect(buf.trim(), 'no partial event at the end').toBe('')
  return { data, at }
}

/**
 * Events arrived while the generation ran, not all at its end: in more than one read, and spread
 * over more than a third of the generation's shortest possible time (`tokens` steps of STEP_MS; a
 * body buffered until the end arrives within a few ms; a loaded machine only spreads it more).
 */
function expectIncremental(at: number[], tokens: number): void {
  expect(at.length, 'reads that carried events').toBeGreaterThan(1)
  expect(at.at(-1)! - at[0]!, 'ms between the first and the last event').toBeGreaterThan((tokens * STEP_MS) / 3)
}

beforeAll(async () => {
  const wsPort = await freePort()
  nats = await startNatsServer({ extraConfig: `websocket { listen: "127.0.0.1:${wsPort}", no_tls: true }` })
  fx = writeModelFixtures()
  stateDir = mkdtempSync(join(tmpdir(), 'cohort-edge-gen-'))
  worker = spawnCohort(['worker', '--nats', nats.url, '--threads', '1', '--model', `demo=${fx.demo}`, '--generative', `chars=${CHAR_GENERATOR}`], {
    CHARGEN_STEP_MS: String(STEP_MS),
    CHARGEN_STATE: join(stateDir, 'state.json'),
  })
  await worker.waitFor(/serving/, 60_000)
  nodeGw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await nodeGw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  nodeBase = `http://127.0.0.1:${port}`
  outDir = mkdtempSync(join(tmpdir(), 'cohort-edge-'))
  const ws = `ws://127.0.0.1:${wsPort}`
  const [w, b] = await Promise.allSettled([startWorkerd(ws, outDir), startBun(ws)])
  if (w.status === 'fulfilled') {
    runtimes['workerd'] = w.value
  }
  if (b.status === 'fulfilled') {
    runtimes['bun'] = b.value
  }
  for (const r of [w, b]) {
    if (r.status === 'rejected') {
      throw r.reason
    }
  }
}, 180_000)

afterAll(async () => {
  await Promise.all(Object.values(runtimes).map((r) => r.stop()))
  await Promise.all(allStarted(worker, nodeGw).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  if (outDir) {
    rmSync(outDir, { recursive: true, force: true })
  }
  if (stateDir) {
    rmSync(stateDir, { recursive: true, force: true })
  }
  if (ifStarted(fx)) {
    rmSync(fx.dir, { recursive: true, force: true })
  }
})

describe.each(['workerd', 'bun'])('the gateway on %s over NATS websocket', (name) => {
  const base = () => {
    const r = runtimes[name]
    if (!r) {
      throw new Error(`${name} did not start`)
    }
    return r.baseUrl
  }

  it('serves model metadata, the same as the Node gateway', async () => {
    const [edge, node] = await Promise.all([call(base(), '/v2/models/demo'), call(nodeBase, '/v2/models/demo')])
    expect(edge.status, JSON.stringify(edge.body)).toBe(200)
    expect(edge.body).toMatchObject({ name: 'demo', inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 256] }] })
    expect(edge.body).toEqual(node.body)
  })

  it('infers with the demo model and answers exactly as the Node gateway does', async () => {
    const body = { inputs: [{ name: 'input', datatype: 'FP32', shape: [3, 256], data: input(3, name.length) }] }
    const [edge, node] = await Promise.all([post(base(), '/v2/models/demo/infer', body), post(nodeBase, '/v2/models/demo/infer', body)])
    expect(edge.status, JSON.stringify(edge.body)).toBe(200)
    expect(node.status).toBe(200)
    expect(edge.body.outputs).toHaveLength(1)
    expect(edge.body.outputs[0]).toMatchObject({ name: 'logits', datatype: 'FP32', shape: [3, 10] })
    expect(edge.body.outputs).toEqual(node.body.outputs)
  })

  it('carries a request past NATS max_payload (chunked over the websocket connection)', async () => {
    const rows = 1_200 // 1.2 MB of FP32 in the encoded request, past the 1 MiB default
    const body = { inputs: [{ name: 'input', datatype: 'FP32', shape: [rows, 256], data: input(rows, 9) }] }
    // A deadline of its own: under the model's derived SLO (1 s floor, libs/batching/src/slo.ts) the
    // worker may refuse the second of two such requests as late (503 OVERLOADED) on a loaded
    // machine; this test is about the chunking.
    const patient = { 'x-cohort-timeout-ms': '30000' }
    const [edge, node] = await Promise.all([post(base(), '/v2/models/demo/infer', body, patient), post(nodeBase, '/v2/models/demo/infer', body, patient)])
    expect(edge.status, JSON.stringify(edge.body).slice(0, 300)).toBe(200)
    expect(edge.body.outputs[0].shape).toEqual([rows, 10])
    expect(edge.body.outputs).toEqual(node.body.outputs)
  }, 60_000)

  it('answers 404 MODEL_NOT_FOUND for an unknown model', async () => {
    const r = await post(base(), '/v2/models/no-such-model/infer', {
      inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: input(1, 3) }],
    })
    expect(r.status).toBe(404)
    expect(r.body.code).toBe('MODEL_NOT_FOUND')
    const meta = await call(base(), '/v2/models/no-such-model')
    expect(meta.status).toBe(404)
  })

  it('answers 400 for bad input, and keeps serving', async () => {
    const badJson = await post(base(), '/v2/models/demo/infer', '{not json')
    expect(badJson.status).toBe(400)
    expect(badJson.body.code).toBe('BAD_REQUEST')
    const badShape = await post(base(), '/v2/models/demo/infer', {
      inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 255], data: new Array(255).fill(1) }],
    })
    expect(badShape.status).toBe(400)
    expect(badShape.body.code).toBe('INVALID_INPUT')
    expect(badShape.body.error).toMatch(/shape/)
    const ok = await post(base(), '/v2/models/demo/infer', { inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: input(1, 1) }] })
    expect(ok.status).toBe(200)
  })

  it('streams POST /v1/completions (SSE) as it is generated: the greedy text of the Node gateway, then [DONE]', async () => {
    const body = { model: 'chars', prompt: `edge ${name}`, max_tokens: 30, temperature: 0, ignore_eos: true }
    const node = await post(nodeBase, '/v1/completions', body)
    expect(node.status, JSON.stringify(node.body)).toBe(200)
    const want = node.body.choices[0].text as string
    expect(node.body.usage.completion_tokens).toBe(30)
    const r = await fetch(`${base()}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      signal: AbortSignal.timeout(30_000),
    })
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    const { data, at } = await readSse(r)
    expect(data.at(-1)).toBe('[DONE]')
    const chunks = data.slice(0, -1) as { choices: { text: string; finish_reason: string | null }[]; usage: unknown }[]
    expect(chunks.at(-1)?.usage).toEqual(node.body.usage)
    const text = chunks.slice(0, -1)
    expect(text.length).toBeGreaterThan(2)
    expect(text.map((c) => c.choices[0]?.text ?? '').join('')).toBe(want)
    expect(text.at(-1)?.choices[0]?.finish_reason).toBe('length')
    expectIncremental(at, 30)
  })

  it('streams POST /v2/models/{m}/generate_stream as it is generated: the greedy text of the Node gateway, a final event', async () => {
    const body = { text_input: `triton ${name}`, parameters: { max_tokens: 30, temperature: 0, ignore_eos: true } }
    const node = await post(nodeBase, '/v2/models/chars/generate', body)
    expect(node.status, JSON.stringify(node.body)).toBe(200)
    const want = node.body.text_output as string
    expect(want.length, 'text of 30 tokens (an end-of-sequence token adds no character)').toBeGreaterThan(20)
    const r = await fetch(`${base()}/v2/models/chars/generate_stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    })
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    const { data, at } = await readSse(r)
    const events = data as { model_name: string; text_output: string; finish_reason?: string }[]
    expect(events.length).toBeGreaterThan(2)
    expect(events.every((e) => e.model_name === 'chars')).toBe(true)
    expect(events.map((e) => e.text_output).join('')).toBe(want)
    expect(events.at(-1)?.finish_reason).toBe('length')
    expectIncremental(at, 30)
  })

  it('a client that disconnects mid-stream frees its sequence slot (counted by the generator)', async () => {
    await until(() => genState().running === 0, 'no sequence running before the test')
    const before = genState().cancelled
    const ac = new AbortController()
    const r = await fetch(`${base()}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chars', prompt: `gone ${name}`, max_tokens: 8000, ignore_eos: true, stream: true }),
      signal: ac.signal,
    })
    expect(r.status).toBe(200)
    const reader = r.body!.getReader()
    await reader.read() // the stream has begun: the sequence holds a slot
    await until(() => genState().running === 1, 'the sequence to run')
    ac.abort()
    await reader.cancel().catch(() => undefined)
    await until(() => genState().running === 0, 'the abandoned sequence to leave the generator')
    expect(genState().cancelled).toBe(before + 1)
  })

  it('serves /metrics with the values of the requests above (one registry across request-scoped apps)', async () => {
    const r = await call(base(), '/metrics')
    expect(r.status).toBe(200)
    const m = parsePrometheus(String(r.body))
    // The infers above: three 200s, one 404 (unknown names count under `_unknown`) and two 400s.
    expect(m.get('cohort_requests_total{code="OK",model="demo"}')).toBe(3)
    expect(m.get('cohort_requests_total{code="MODEL_NOT_FOUND",model="_unknown"}')).toBe(1)
    expect(m.get('cohort_requests_total{code="BAD_REQUEST",model="demo"}')).toBe(1)
    expect(m.get('cohort_requests_total{code="INVALID_INPUT",model="demo"}')).toBe(1)
    expect(m.get('cohort_request_duration_seconds_count{model="demo"}')).toBeGreaterThanOrEqual(5)
    // No process metrics on an edge runtime (no process.cpuUsage or memoryUsage there).
    expect(String(r.body)).not.toContain('process_cpu_seconds_total')
  })
})

describe('when the NATS websocket listener is down', () => {
  it('both runtimes answer 503 promptly instead of hanging', async () => {
    await nats.stop()
    for (const [name, r] of Object.entries(runtimes)) {
      for (const path of ['/v2/models/demo', '/v2/models/demo/infer']) {
        const init: RequestInit = path.endsWith('/infer')
          ? {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: input(1, 2) }] }),
            }
          : {}
        // A hang would trip the 30 s abort in call() and fail here.
        const res = await call(r.baseUrl, path, init)
        expect(res.status, `${name} ${path}: ${JSON.stringify(res.body)}`).toBe(503)
        expect(res.body.code).toBe('NO_WORKER')
      }
    }
  }, 120_000)
})
