// Config precedence over real NATS with the real CLI: a worker process started with per-model flags
// (`--model a=PATH,max-batch-size=4`) beside a global `--max-batch-size 16`, a gateway process, and
// the admin API's runtime override (NATS KV) on top, read back per field with its source from
// `GET /v2/models/{m}/config` and removed again with `DELETE /admin/models/{m}/batching`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''

beforeAll(async () => {
  nats = await startNatsServer()
  const fx = writeModelFixtures()
  worker = spawnCohort([
    'worker',
    '--nats',
    nats.url,
    '--id',
    'w1',
    '--model',
    `a=${fx.demo},max-batch-size=4,policy=timer`,
    '--model',
    `b=${fx.demo}`,
    '--max-batch-size',
    '16',
    '--max-delay-ms',
    '2',
  ])
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0'])
  await worker.waitFor(/serving a, b/, 90_000)
  const m = await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000)
  base = m[1]!
}, 120_000)

afterAll(async () => {
  await ifStarted(gateway)?.stop()
  await ifStarted(worker)?.stop()
  await ifStarted(nats)?.stop()
})

interface Cfg {
  max_batch_size: number
  parameters: Record<string, { string_value: string }>
}

async function config(model: string): Promise<Cfg> {
  const r = await fetch(`${base}/v2/models/${model}/config`)
  expect(r.status).toBe(200)
  return (await r.json()) as Cfg
}

/** Poll the config until `ok` holds (a KV change reaches the worker asynchronously). */
async function configUntil(model: string, ok: (c: Cfg) => boolean, timeoutMs = 20_000): Promise<Cfg> {
  const end = Date.now() + timeoutMs
  let c = await config(model)
  while (!ok(c) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100))
    c = await config(model)
  }
  return c
}

const src = (c: Cfg, k: string) => c.parameters[`cohort_source_${k}`]?.string_value
const admin = (model: string, method: string, body?: unknown, query = '') =>
  fetch(`${base}/admin/models/${model}/batching${query}`, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  })

describe('config precedence: model < flags (global < per-model) < runtime, over NATS', () => {
  it('per-model flags apply to their model only; the global flag to the others', async () => {
    const a = await config('a')
    const b = await config('b')
    expect(a.max_batch_size).toBe(4)
    expect(b.max_batch_size).toBe(16)
    expect(a.parameters['cohort_policy']?.string_value).toBe('timer')
    expect(b.parameters['cohort_policy']?.string_value).toBe('eager')
    expect(src(a, 'maxBatchSize')).toBe('flags')
    expect(src(b, 'maxDelayMs')).toBe('flags')
    expect(src(b, 'autoBatchSize')).toBe('model')
    expect(src(b, 'maxQueue')).toBe('default')
  })

  it('a runtime override wins over the flags and names its source; an out-of-bounds value is 400', async () => {
    const bad = await admin('a', 'PUT', { maxBatchSize: 100_000 })
    expect(bad.status).toBe(400)
    expect(await bad.text()).toMatch(/65536/)
    expect((await admin('a', 'PUT', { maxBatchSize: 2, maxQueue: 64 })).status).toBe(200)
    const a = await configUntil('a', (c) => c.max_batch_size === 2 && src(c, 'maxQueue') === 'runtime')
    expect(a.max_batch_size).toBe(2)
    expect(src(a, 'maxBatchSize')).toBe('runtime')
    expect(a.parameters['cohort_max_queue']?.string_value).toBe('64')
    expect((await config('b')).max_batch_size).toBe(16)
  })

  it('DELETE ?fields= removes one field of the override; DELETE removes the rest and the flags serve again', async () => {
    expect((await admin('a', 'DELETE', undefined, '?fields=maxBatchSize')).status).toBe(200)
    let a = await configUntil('a', (c) => c.max_batch_size === 4)
    expect(a.max_batch_size).toBe(4)
    expect(src(a, 'maxBatchSize')).toBe('flags')
    expect(src(a, 'maxQueue')).toBe('runtime')
    const stored = await (await admin('a', 'GET')).json()
    expect(stored.stored).toEqual({ maxQueue: 64 })
    expect((await admin('a', 'DELETE')).status).toBe(200)
    a = await configUntil('a', (c) => src(c, 'maxQueue') === 'default')
    expect(src(a, 'maxQueue')).toBe('default')
    expect(a.parameters['cohort_max_queue']?.string_value).toBe('4096')
    expect((await (await admin('a', 'GET')).json()).stored).toEqual({})
    expect((await admin('a', 'DELETE', undefined, '?fields=nope')).status).toBe(400)
  })
})
