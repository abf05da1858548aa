// The model repository over real NATS with the real CLI (docs/repository.md): a worker process
// serving `--model-repository DIR` (polling on), a gateway process with an admin key, and real ONNX
// models whose output names their version (y = x + k). Two versions at once, the policy's routing,
// versions added and removed while serving (polling, explicit load and unload), requests in flight
// across a load and an unload (every one answered 200, by the version that took it), broken
// versions and config.json (they stay out, the old version serves, the index says why), and the
// config layers (config.json < flags < runtime override) with their reset.
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect } from '@nats-io/transport-node'
import { graph, model, node, tensorInit, valueInfo } from '@cohort/onnx-builder'
import { createNatsTransport } from '@cohort/transport'
import { settledWithin, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { entry, repositoryApi, until, type Entry } from './repository-api.ts'

const KEY = 'repo-admin-key'
/** y = x + k: FP32 ['batch', 1] in and out. */
function addModel(k: number): Uint8Array {
  return model(
    graph({
      name: `add_${k}`,
      inputs: [valueInfo('x', 'FP32', ['batch', 1])],
      outputs: [valueInfo('y', 'FP32', ['batch', 1])],
      initializers: [tensorInit('k', 'FP32', [1], [k])],
      nodes: [node('Add', ['x', 'k'], ['y'])],
    }),
  )
}

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''
let repo = ''

/** Write a version atomically: into a hidden folder, then one rename (docs/repository.md#polling). */
function putVersion(name: string, version: string, bytes: Uint8Array): void {
  const tmp = mkdtempSync(join(repo, '.incoming-'))
  writeFileSync(join(tmp, 'model.onnx'), bytes)
  mkdirSync(join(repo, name), { recursive: true })
  renameSync(tmp, join(repo, name, version))
}

beforeAll(async () => {
  nats = await startNatsServer()
  repo = mkdtempSync(join(tmpdir(), 'cohort-repo-'))
  putVersion('add', '1', addModel(100))
  putVersion('add', '2', addModel(200))
  writeFileSync(join(repo, 'add', 'config.json'), JSON.stringify({ versionPolicy: { latest: 2 }, batching: { maxBatchSize: 4, maxDelayMs: 7 }, warmup: 'off' }))
  putVersion('solo', '1', addModel(1000))
  putVersion('broken', '1', addModel(5))
  putVersion('hold', '1', addModel(10))
  putVersion('dot.ted', '1', addModel(7))
  putVersion('bad', '1', new TextEncoder().encode('not an onnx model'))
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'w1', '--model-repository', repo, '--repository-poll-ms', '200', '--max-delay-ms', '3'])
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--admin-key', KEY])
  await worker.waitFor(/worker w1 serving .*add/, 90_000)
  const m = await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000)
  base = m[1]!
}, 120_000)

afterAll(async () => {
  await ifStarted(gateway)?.stop()
  await ifStarted(worker)?.stop()
  await ifStarted(nats)?.stop()
  if (repo) {
    rmSync(repo, { recursive: true, force: true })
  }
})

interface Answer {
  status: number
  body: { model_version?: string; outputs?: { data: number[] }[]; code?: string; error?: string }
}

async function infer(path: string, x: number, timeoutMs = 20_000): Promise<Answer> {
  const r = await fetch(`${base}/v2/models/${path}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': String(timeoutMs) },
    body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [x] }] }),
  })
  return { status: r.status, body: (await r.json()) as Answer['body'] }
}

const y = (a: Answer) => a.body.outputs?.[0]?.data[0]
const auth = { authorization: `Bearer ${KEY}` }

const { index, repoOp } = repositoryApi(() => base, KEY)

/** Items queued for `name` on the workers ($SRV.STATS via /v2/workers). */
async function queued(name: string): Promise<number> {
  const r = (await (await fetch(`${base}/v2/workers`)).json()) as { workers: { endpoints: { model: string; queued: number | null }[] }[] }
  return r.workers
    .flatMap((w) => w.endpoints)
    .filter((e) => e.model === name)
    .reduce((a, e) => a + (e.queued ?? 0), 0)
}

async function admin(name: string, method: string, body?: unknown): Promise<Response> {
  return fetch(`${base}/admin/models/${name}/batching`, {
    method,
    headers: { ...auth, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
}

describe('model repository over NATS', () => {
  it('serves two versions at once: an explicit version gets that version, the bare name the newest', async () => {
    const v1 = await infer('add/versions/1', 1)
    const v2 = await infer('add/versions/2', 1)
    const bare = await infer('add', 1)
    expect([v1.status, v2.status, bare.status]).toEqual([200, 200, 200])
    expect([y(v1), v1.body.model_version]).toEqual([101, '1'])
    expect([y(v2), v2.body.model_version]).toEqual([201, '2'])
    expect([y(bare), bare.body.model_version]).toEqual([201, '2'])
    const v3 = await infer('add/versions/3', 1)
    expect(v3.status).toBe(404)
    expect(v3.body.code).toBe('MODEL_NOT_FOUND')
    // Metadata per version, and the merged list of versions.
    const meta = (await (await fetch(`${base}/v2/models/add/versions/1`)).json()) as { name: string }
    expect(meta.name).toBe('add')
    expect((await fetch(`${base}/v2/models/add/versions/1/ready`)).status).toBe(200)
    expect((await fetch(`${base}/v2/models/add/versions/3/ready`)).status).toBe(404)
    const list = (await (await fetch(`${base}/v2/models`)).json()) as { models: { name: string; versions: string[] }[] }
    expect(list.models.find((x) => x.name === 'add')?.versions).toEqual(['2', '1'])
    // A dotted name travels as one subject token (%2E) and is served like any other.
    const dotted = await infer('dot.ted', 1)
    expect([dotted.status, y(dotted)]).toEqual([200, 8])
  }, 60_000)

  it('keeps the repository extension behind the admin keys and lists every version with its state', async () => {
    expect((await fetch(`${base}/v2/repository/index`)).status).toBe(401)
    expect((await fetch(`${base}/v2/repository/index`, { headers: { authorization: 'Bearer nope' } })).status).toBe(403)
    expect((await fetch(`${base}/v2/repository/models/add/load`, { method: 'POST' })).status).toBe(401)
    const es = await index()
    expect(entry(es, 'add', '1')?.state).toBe('READY')
    expect(entry(es, 'add', '2')?.state).toBe('READY')
    expect(entry(es, 'solo', '1')?.state).toBe('READY')
    expect(entry(es, 'bad', '1')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching(/failed to load bad\/1\/model\.onnx/) })
    const ready = (await (
      await fetch(`${base}/v2/repository/index`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"ready": true}' })
    ).json()) as Entry[]
    expect(ready.every((e) => e.state === 'READY')).toBe(true)
    expect(ready.some((e) => e.name === 'bad')).toBe(false)
  }, 30_000)

  it('a load that leaves no version serving is 400 MODEL_LOAD_FAILED naming why; an unknown folder is 404', async () => {
    const r = await repoOp('load', 'bad')
    expect(r.status).toBe(400)
    expect(r.body.code).toBe('MODEL_LOAD_FAILED')
    expect(r.body.error).toMatch(/failed to load bad\/1\/model\.onnx/)
    const none = await repoOp('load', 'nosuch')
    expect(none.status).toBe(404)
    expect(none.body.error).toMatch(/no folder nosuch/)
    const noUnload = await repoOp('unload', 'nosuch')
    expect([noUnload.status, noUnload.body.code]).toEqual([404, 'MODEL_NOT_FOUND'])
  }, 60_000)

  it('config layers: config.json < flags < runtime override, and DELETE restores the file value', async () => {
    type Cfg = { max_batch_size: number; parameters: Record<string, { string_value: string }> }
    const cfg = async () => (await (await fetch(`${base}/v2/models/add/config`)).json()) as Cfg
    const src = (c: Cfg, k: string) => c.parameters[`cohort_source_${k}`]?.string_value
    let c = await cfg()
    expect([c.max_batch_size, src(c, 'maxBatchSize')]).toEqual([4, 'file'])
    expect([c.parameters['cohort_max_delay_ms']?.string_value, src(c, 'maxDelayMs')]).toEqual(['3', 'flags'])
    expect((await admin('add', 'PUT', { maxBatchSize: 2 })).status).toBe(200)
    c = await until(cfg, (x) => x.max_batch_size === 2)
    expect([c.max_batch_size, src(c, 'maxBatchSize')]).toEqual([2, 'runtime'])
    // The explicit version follows the same override (runtime config is per model name).
    const v1 = (await (await fetch(`${base}/v2/models/add/versions/1/config`)).json()) as Cfg
    expect(src(v1, 'maxBatchSize')).toBe('runtime')
    expect((await admin('add', 'DELETE')).status).toBe(200)
    c = await until(cfg, (x) => x.max_batch_size === 4)
    expect([c.max_batch_size, src(c, 'maxBatchSize')]).toEqual([4, 'file'])
  }, 60_000)

  it('polling: a version added while serving takes over the bare name with no request failed; removed, the old one serves again', async () => {
    const answers: Answer[] = []
    const loop = { stop: false } // set by the test below while the loop runs (a property: each read sees the latest)
    const traffic = (async () => {
      while (!loop.stop) {
        const batch = await Promise.all([infer('solo', 1), infer('solo', 2)])
        answers.push(...batch)
      }
    })()
    putVersion('solo', '2', addModel(2000))
    const switched = await until(
      () => infer('solo', 0),
      (a) => y(a) === 2000,
      45_000,
    )
    loop.stop = true
    await traffic
    expect(y(switched)).toBe(2000)
    expect(answers.length).toBeGreaterThan(0)
    for (const a of answers) {
      expect(a.status, JSON.stringify(a.body)).toBe(200)
      const x = y(a)! % 1000
      expect([1000 + x, 2000 + x], JSON.stringify(a.body)).toContain(y(a))
    }
    // latest 1: version 1 stops, and the index says why.
    const es = await until(index, (x) => entry(x, 'solo', '1')?.state === 'UNAVAILABLE')
    expect(entry(es, 'solo', '2')?.state).toBe('READY')
    expect(entry(es, 'solo', '1')?.reason).toMatch(/not selected by the version policy \(latest 1\)/)
    expect(
      (
        await until(
          () => infer('solo/versions/1', 1),
          (a) => a.status === 404,
        )
      ).status,
    ).toBe(404)
    // The new version's folder removed: version 1 is the newest complete one again.
    rmSync(join(repo, 'solo', '2'), { recursive: true })
    const back = await until(
      () => infer('solo', 3),
      (a) => y(a) === 1003,
      45_000,
    )
    expect([back.status, back.body.model_version]).toEqual([200, '1'])
    expect(
      (
        await until(
          () => infer('solo/versions/2', 1),
          (a) => a.status === 404,
        )
      ).status,
    ).toBe(404)
  }, 120_000)

  it('a broken new version stays out: the old one keeps serving and the index says why', async () => {
    putVersion('broken', '2', new TextEncoder().encode('garbage, not onnx'))
    const es = await until(index, (x) => entry(x, 'broken', '2')?.reason?.includes('failed to load') === true, 45_000)
    expect(entry(es, 'broken', '2')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching(/failed to load broken\/2\/model\.onnx/) })
    expect(entry(es, 'broken', '1')?.state).toBe('READY')
    const a = await infer('broken', 1)
    expect([a.status, y(a), a.body.model_version]).toEqual([200, 6, '1'])
    // A bad config.json: nothing new loads, what serves stays, the index names the field.
    writeFileSync(join(repo, 'broken', 'config.json'), JSON.stringify({ batching: { maxBatchSize: 0 } }))
    const es2 = await until(index, (x) => entry(x, 'broken', '2')?.reason?.includes('config.json') === true, 45_000)
    expect(entry(es2, 'broken', '2')?.reason).toMatch(/broken\/config\.json: line 1: batching: invalid value for maxBatchSize: 0/)
    expect(entry(es2, 'broken', '1')?.state).toBe('READY')
    expect(y(await infer('broken', 2))).toBe(7)
  }, 120_000)

  it('load and unload with requests in flight: every request held by the old version is answered by it', async () => {
    // The gate: a timer batch of 64 that waits up to an hour for company holds every request in
    // the worker's queue until the test lowers maxDelayMs (a draining version follows it too).
    type Cfg = { parameters: Record<string, { string_value: string }> }
    const hold = async (maxDelayMs: number) => {
      expect((await admin('hold', 'PUT', { policy: 'timer', maxDelayMs, maxBatchSize: 64, autoBatchSize: false, admission: false })).status).toBe(200)
      const c = await until(
        async () => (await (await fetch(`${base}/v2/models/hold/config`)).json()) as Cfg,
        (x) => x.parameters['cohort_policy']?.string_value === 'timer' && x.parameters['cohort_max_delay_ms']?.string_value === String(maxDelayMs),
      )
      expect(c.parameters['cohort_max_delay_ms']?.string_value).toBe(String(maxDelayMs))
    }
    const HOUR = 3_600_000
    await hold(HOUR)
    const N = 6
    let held = Array.from({ length: N }, (_, i) => infer('hold', i, 120_000))
    expect(
      await until(
        () => queued('hold'),
        (q) => q >= N,
        10_000,
      ),
    ).toBeGreaterThanOrEqual(N)
    // A new version, loaded explicitly while they wait: when the load returns they are still held
    // (by version 1, now draining); once released, version 1 answers every one.
    putVersion('hold', '2', addModel(20))
    const load = await repoOp('load', 'hold')
    expect(load.status, JSON.stringify(load.body)).toBe(200)
    expect(entry(load.body.versions ?? [], 'hold', '2')?.state).toBe('READY')
    expect(await settledWithin(Promise.all(held), 300)).toBe('pending')
    await hold(0)
    let answers = await Promise.all(held)
    expect(answers.map((a) => a.status)).toEqual(Array(N).fill(200))
    expect(answers.map((a) => y(a))).toEqual(Array.from({ length: N }, (_, i) => 10 + i))
    expect(answers.every((a) => a.body.model_version === '1')).toBe(true)
    // Unload with requests held by version 2: still held when the unload returns, then each is
    // answered 200 by it, then the name is gone.
    await hold(HOUR)
    held = Array.from({ length: N }, (_, i) => infer('hold', i, 120_000))
    expect(
      await until(
        () => queued('hold'),
        (q) => q >= N,
        10_000,
      ),
    ).toBeGreaterThanOrEqual(N)
    const unload = await repoOp('unload', 'hold')
    expect(unload.status).toBe(200)
    expect(await settledWithin(Promise.all(held), 300)).toBe('pending')
    // Released through the runtime config the workers follow (NATS KV): the admin route needs a
    // worker serving the model, and none does now.
    const nc = await connect({ servers: nats.url })
    try {
      const config = createNatsTransport(nc).config
      await config.put('hold', { ...(await config.get('hold')), maxDelayMs: 0 })
      answers = await Promise.all(held)
    } finally {
      await nc.close()
    }
    expect(answers.map((a) => a.status)).toEqual(Array(N).fill(200))
    expect(answers.map((a) => y(a))).toEqual(Array.from({ length: N }, (_, i) => 20 + i))
    expect(answers.every((a) => a.body.model_version === '2')).toBe(true)
    const gone = await until(
      () => infer('hold', 1, 2000),
      (a) => a.status !== 200,
    )
    expect([404, 503]).toContain(gone.status)
    const es = await index()
    expect(entry(es, 'hold', '2')).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' })
    // Polling leaves an unloaded model out; a load brings it back.
    await new Promise((r) => setTimeout(r, 600))
    expect((await infer('hold', 1, 2000)).status).not.toBe(200)
    expect((await repoOp('load', 'hold')).status).toBe(200)
    expect((await admin('hold', 'DELETE')).status).toBe(200)
    const again = await until(
      () => infer('hold', 1),
      (a) => a.status === 200,
    )
    expect([y(again), again.body.model_version]).toEqual([21, '2'])
  }, 120_000)
})
