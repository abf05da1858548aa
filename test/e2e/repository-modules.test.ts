// Predictor and pipeline folders in a model repository, over real NATS with the real CLI
// (docs/repository.md#predictor-and-pipeline-folders): a worker process serving
// `--model-repository DIR` (polling on) beside a gateway process. DIR holds an ONNX model, a
// predictor with two versions (its config.ts sets the version policy and a batching field), a
// predictor written to hold its batch until the test releases it (load and unload with requests in
// flight), a predictor version that throws at import, a pipeline, and folders the repository must
// refuse (two entry files in one version; an ONNX-only field for a predictor). Each module declares
// a name of its own: the repository serves it under its folder's name.
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { graph, model, node, tensorInit, valueInfo } from '@cohort/onnx-builder'
import { postJson, settledWithin, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { entry, repositoryApi, until as untilFor } from './repository-api.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const KEY = 'repo-modules-key'

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''
/** Under the checkout's ignored tmp/, so modules there resolve `@cohort/predictor` as a user's would from their project. */
let work = ''
let repo = ''
let gates = ''

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

/** A predictor module: y = x + k, declared under a name that is not its folder's (TypeScript unless `js`). */
function addPredictor(k: number, js = false): string {
  return `import { Type, definePredictor } from '@cohort/predictor'
${js ? '' : `const typed: number = ${k}\nvoid typed\n`}export default definePredictor({
  name: 'declared-${k}',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  predict: (inputs) => inputs.map((i) => ({ y: i.x + ${k} })),
})
`
}

/**
 * A predictor whose batches wait for the file `gates/<tag>-go` (writing `gates/<tag>-started`
 * first): requests stay in flight until the test lets them finish.
 */
function gatedPredictor(tag: string, k: number): string {
  const g = JSON.stringify(join(gates, tag))
  return `import { existsSync, writeFileSync } from 'node:fs'
import { Type, definePredictor } from '@cohort/predictor'
export default definePredictor({
  name: 'gated',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  async predict(inputs) {
    writeFileSync(${g} + '-started', '')
    while (!existsSync(${g} + '-go')) await new Promise((r) => setTimeout(r, 20))
    return inputs.map((i) => ({ y: i.x + ${k} }))
  },
})
`
}

/** Write a version atomically: files into a hidden folder, then one rename (docs/repository.md#polling). */
function putVersion(name: string, version: string, files: Record<string, string | Uint8Array>): void {
  const tmp = mkdtempSync(join(repo, '.incoming-'))
  for (const [f, body] of Object.entries(files)) {
    writeFileSync(join(tmp, f), body)
  }
  mkdirSync(join(repo, name), { recursive: true })
  renameSync(tmp, join(repo, name, version))
}

beforeAll(async () => {
  nats = await startNatsServer()
  mkdirSync(join(ROOT, 'tmp'), { recursive: true })
  work = mkdtempSync(join(ROOT, 'tmp', 'repo-modules-'))
  repo = join(work, 'models')
  gates = join(work, 'gates')
  mkdirSync(repo)
  mkdirSync(gates)
  putVersion('onnx', '1', { 'model.onnx': addModel(100) })
  // Version 1 plain JavaScript (model.mjs), version 2 TypeScript (model.ts).
  putVersion('pred', '1', { 'model.mjs': addPredictor(1000, true) })
  putVersion('pred', '2', { 'model.ts': addPredictor(2000) })
  writeFileSync(
    join(repo, 'pred', 'config.ts'),
    `import { defineModelConfig } from '@cohort/predictor'\nexport default defineModelConfig({ versionPolicy: { latest: 2 }, batching: { maxBatchSize: 4 } })\n`,
  )
  putVersion('hold', '1', { 'model.ts': gatedPredictor('hold-1', 10) })
  putVersion('brk', '1', { 'model.ts': addPredictor(5) })
  // The pipeline fixture of docs/pipelines.md's deadline tests, re-exported: declared "sleepy-pipeline".
  const fixture = pathToFileURL(join(ROOT, 'test/fixtures/pipeline-sleepy/cohort.config.ts')).href
  putVersion('pipe', '1', { 'pipeline.ts': `export { default } from ${JSON.stringify(fixture)}\n` })
  putVersion('mix', '1', { 'model.onnx': addModel(1), 'model.ts': addPredictor(1) })
  putVersion('onnxcfg', '1', { 'model.ts': addPredictor(1) })
  writeFileSync(join(repo, 'onnxcfg', 'config.json'), JSON.stringify({ ep: 'cpu', warmup: 'off' }))
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'wm', '--model-repository', repo, '--repository-poll-ms', '200', '--max-delay-ms', '3'])
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--admin-key', KEY])
  await worker.waitFor(/worker wm serving .*pred/, 120_000)
  const m = await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000)
  base = m[1]!
}, 180_000)

afterAll(async () => {
  if (gates && existsSync(gates)) {
    // Let anything still held finish, so the worker drains at once.
    writeFileSync(join(gates, 'hold-1-go'), '')
    writeFileSync(join(gates, 'hold-2-go'), '')
  }
  await ifStarted(gateway)?.stop()
  await ifStarted(worker)?.stop()
  await ifStarted(nats)?.stop()
  if (work) {
    rmSync(work, { recursive: true, force: true })
  }
})

interface Answer {
  status: number
  body: { model_name?: string; model_version?: string; outputs?: { name: string; data: number[] }[]; code?: string; error?: string }
}

/** OIP infer of one item {x} (a predictor's JSON item from FP64 [1] tensors). */
async function infer(path: string, x: number, timeoutMs = 30_000): Promise<Answer> {
  const r = await postJson(
    `${base}/v2/models/${path}/infer`,
    { inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [x] }] },
    {
      'x-cohort-timeout-ms': String(timeoutMs),
    },
  )
  return { status: r.status, body: r.body as Answer['body'] }
}

const y = (a: Answer) => a.body.outputs?.find((o) => o.name === 'y')?.data[0]

const { index, repoOp } = repositoryApi(() => base, KEY)
const until = <T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 45_000) => untilFor(fn, ok, timeoutMs)

describe('model repository: predictor and pipeline folders over NATS', () => {
  it('serves an ONNX model, a predictor with two versions (by version; the bare name to the newest) under the folder name, and a pipeline', async () => {
    const onnx = await postJson(`${base}/v2/models/onnx/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [1] }] })
    expect([onnx.status, (onnx.body as Answer['body']).outputs?.[0]?.data[0]]).toEqual([200, 101])
    const v1 = await infer('pred/versions/1', 1)
    const v2 = await infer('pred/versions/2', 1)
    const bare = await infer('pred', 1)
    expect([v1.status, y(v1), v1.body.model_version], JSON.stringify(v1.body)).toEqual([200, 1001, '1'])
    expect([v2.status, y(v2), v2.body.model_version], JSON.stringify(v2.body)).toEqual([200, 2001, '2'])
    expect([bare.status, y(bare), bare.body.model_version]).toEqual([200, 2001, '2'])
    expect(bare.body.model_name).toBe('pred')
    expect((await infer('pred/versions/3', 1)).status).toBe(404)
    // The module's declared name is not served: only the folder's.
    expect((await infer('declared-2000', 1)).status).toBe(404)
    const meta = (await (await fetch(`${base}/v2/models/pred/versions/1`)).json()) as { name: string; platform: string }
    expect([meta.name, meta.platform]).toEqual(['pred', 'cohort_predictor'])
    const list = (await (await fetch(`${base}/v2/models`)).json()) as { models: { name: string; versions: string[] }[] }
    expect(list.models.find((x) => x.name === 'pred')?.versions).toEqual(['2', '1'])
    // The pipeline, served as "pipe" (declared "sleepy-pipeline"), through both of its stages.
    const p = await postJson(`${base}/models/pipe/predictions`, { input: { sleepMs: 0, tag: 'hi' } })
    expect([p.status, (p.body as { output?: unknown }).output], JSON.stringify(p.body)).toEqual([200, { tag: 'hi', after: true }])
    const pmeta = (await (await fetch(`${base}/v2/models/pipe`)).json()) as { name: string; platform: string; versions: string[] }
    expect([pmeta.name, pmeta.platform, pmeta.versions]).toEqual(['pipe', 'cohort_pipeline', ['1']])
  }, 60_000)

  it('config.ts: its default export is the model config (versionPolicy and batching here), shown as the file layer', async () => {
    type Cfg = { max_batch_size: number; parameters: Record<string, { string_value: string }> }
    for (const path of ['pred', 'pred/versions/1']) {
      const c = (await (await fetch(`${base}/v2/models/${path}/config`)).json()) as Cfg
      expect([c.max_batch_size, c.parameters['cohort_source_maxBatchSize']?.string_value], path).toEqual([4, 'file'])
    }
    const es = await index()
    expect(entry(es, 'pred', '1')?.state).toBe('READY')
    expect(entry(es, 'pred', '2')?.state).toBe('READY')
  }, 30_000)

  it('refuses a version folder with two entry files and an ONNX-only config field for a predictor, saying why in the index', async () => {
    const es = await index()
    expect(entry(es, 'mix', '1')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringMatching(/^mix\/1: model\.onnx and model\.ts in one version folder: a version holds one of model\.onnx/),
    })
    expect(entry(es, 'onnxcfg', '1')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringMatching(/failed to load onnxcfg\/1\/model\.ts: onnxcfg\/config\.json sets ep, warmup, which a predictor does not take/),
    })
  }, 30_000)

  it('a predictor version that throws at import stays out: the old one serves, the index says why; fixed in place, it loads', async () => {
    putVersion('brk', '2', { 'model.ts': `throw new Error('broken on purpose at import')\n` })
    const es = await until(index, (x) => entry(x, 'brk', '2')?.reason?.includes('failed to load') === true)
    expect(entry(es, 'brk', '2')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringMatching(/failed to load brk\/2\/model\.ts: .*broken on purpose at import/),
    })
    expect(entry(es, 'brk', '1')?.state).toBe('READY')
    const a = await infer('brk', 1)
    expect([a.status, y(a), a.body.model_version]).toEqual([200, 6, '1'])
    // The same path with new contents is imported afresh (not from Node's module cache).
    writeFileSync(join(repo, 'brk', '2', 'model.ts'), addPredictor(50))
    const fixed = await until(
      () => infer('brk', 1),
      (r) => r.body.model_version === '2',
    )
    expect([fixed.status, y(fixed)]).toEqual([200, 51])
  }, 120_000)

  it('load and unload of predictor versions with requests in flight: none lost or failed, each answered by the version that took it', async () => {
    const N = 5
    let held = Array.from({ length: N }, (_, i) => infer('hold', i))
    await until(
      () => Promise.resolve(existsSync(join(gates, 'hold-1-started'))),
      (ok) => ok,
      20_000,
    )
    expect(existsSync(join(gates, 'hold-1-started'))).toBe(true)
    // Version 2 loaded while version 1 holds every request (one batch running, the rest queued).
    putVersion('hold', '2', { 'model.ts': gatedPredictor('hold-2', 20) })
    const load = await repoOp('load', 'hold')
    expect(load.status, JSON.stringify(load.body)).toBe(200)
    expect(entry(load.body.versions ?? [], 'hold', '2')?.state).toBe('READY')
    expect(await settledWithin(Promise.all(held), 300)).toBe('pending')
    writeFileSync(join(gates, 'hold-1-go'), '')
    let answers = await Promise.all(held)
    expect(answers.map((a) => a.status)).toEqual(Array(N).fill(200))
    expect(answers.map((a) => y(a))).toEqual(Array.from({ length: N }, (_, i) => 10 + i))
    expect(answers.every((a) => a.body.model_version === '1')).toBe(true)
    // Unload while version 2 holds them: each is answered by it, then the name is gone.
    held = Array.from({ length: N }, (_, i) => infer('hold', i))
    await until(
      () => Promise.resolve(existsSync(join(gates, 'hold-2-started'))),
      (ok) => ok,
      20_000,
    )
    expect(existsSync(join(gates, 'hold-2-started'))).toBe(true)
    const unload = await repoOp('unload', 'hold')
    expect(unload.status).toBe(200)
    expect(await settledWithin(Promise.all(held), 300)).toBe('pending')
    writeFileSync(join(gates, 'hold-2-go'), '')
    answers = await Promise.all(held)
    expect(answers.map((a) => a.status)).toEqual(Array(N).fill(200))
    expect(answers.map((a) => y(a))).toEqual(Array.from({ length: N }, (_, i) => 20 + i))
    expect(answers.every((a) => a.body.model_version === '2')).toBe(true)
    const gone = await until(
      () => infer('hold', 1, 2000),
      (a) => a.status !== 200,
    )
    expect([404, 503]).toContain(gone.status)
    expect(entry(await index(), 'hold', '2')).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' })
    // Loaded again: version 2 serves (its gate is open now).
    expect((await repoOp('load', 'hold')).status).toBe(200)
    const again = await until(
      () => infer('hold', 1),
      (a) => a.status === 200,
    )
    expect([y(again), again.body.model_version]).toEqual([21, '2'])
  }, 120_000)
})
