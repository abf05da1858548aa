// The tabular pipeline (examples/tabular) over real NATS in both placements: fused in one worker,
// and remote with its stages in separate `cohort worker --stage` processes. Same inputs must give
// identical outputs; a bad row fails alone; a short deadline gives 504 without running later
// stages; `cohort serve examples/tabular` (embedded, no NATS) answers too.
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePrometheus } from '@cohort/metrics'
import { postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const TABULAR = fileURLToPath(new URL('../../examples/tabular', import.meta.url))
const SLEEPY = fileURLToPath(new URL('../fixtures/pipeline-sleepy', import.meta.url))
const START_MS = 90_000

/** Deterministic, varied passenger rows. */
function rows(n: number): Record<string, unknown>[] {
  const sexes = ['male', 'female']
  const ports = ['S', 'C', 'Q']
  return Array.from({ length: n }, (_, i) => ({
    pclass: (i % 3) + 1,
    sex: sexes[i % 2],
    age: 2 + ((i * 7) % 70),
    sibsp: i % 4,
    parch: (i * 5) % 3,
    fare: 5 + ((i * 37) % 250),
    embarked: ports[(i * 2) % 3],
  }))
}

const procs: CliProcess[] = []
const servers: NatsServerHandle[] = []
/** The fused placement over NATS (first describe): the embedded server must answer like it. */
let overNats = ''

async function start(args: string[], ready: RegExp): Promise<{ p: CliProcess; m: RegExpMatchArray }> {
  const p = spawnCohort(args)
  procs.push(p)
  const m = await p.waitFor(ready, START_MS)
  return { p, m }
}

async function serve(args: string[]): Promise<string> {
  const { m } = await start(['serve', ...args, '--port', '0'], /serving .* on (http:\/\/127\.0\.0\.1:\d+)/)
  return m[1]!
}

async function predictAll(base: string, model: string, inputs: Record<string, unknown>[], headers: Record<string, string> = {}) {
  return Promise.all(inputs.map((input) => postJson(`${base}/models/${model}/predictions`, { input }, headers)))
}

async function metrics(base: string): Promise<Map<string, number>> {
  return parsePrometheus(await (await fetch(`${base}/metrics`)).text())
}

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await Promise.all(servers.map((s) => s.stop()))
})

describe('tabular pipeline: fused vs remote placement over NATS', () => {
  let fused = ''
  let remote = ''

  beforeAll(async () => {
    const [natsA, natsB] = await Promise.all([startNatsServer(), startNatsServer()])
    servers.push(natsA, natsB)
    // Remote: the stages on their own processes (ONNX on one, the TS stages on another) ...
    await Promise.all([
      start(['worker', TABULAR, '--nats', natsB.url, '--stage', 'mlp', '--threads', '1'], /serving/),
      start(['worker', TABULAR, '--nats', natsB.url, '--stage', 'preprocess', '--stage', 'postprocess'], /serving/),
    ])
    // ... chained by the process that serves the model; fused: every stage in one process.
    ;[remote, fused] = await Promise.all([
      serve([TABULAR, '--nats', natsB.url, '--remote', 'preprocess', '--remote', 'mlp', '--remote', 'postprocess']),
      serve([TABULAR, '--nats', natsA.url, '--threads', '1']),
    ])
    overNats = fused
  }, 4 * START_MS)

  it('gives identical outputs for the same inputs, batched concurrently', async () => {
    const inputs = rows(48)
    const [a, b] = await Promise.all([predictAll(fused, 'tabular', inputs), predictAll(remote, 'tabular', inputs)])
    for (const r of [...a, ...b]) {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
    }
    const outA = a.map((r) => r.body.output)
    const outB = b.map((r) => r.body.output)
    expect(outB).toEqual(outA)
    for (const o of outA) {
      expect(['survived', 'died']).toContain(o.label)
      expect(o.probability).toBeGreaterThanOrEqual(0.5)
      expect(o.probability).toBeLessThanOrEqual(1)
    }
    // The outputs depend on the rows (not a constant).
    expect(new Set(outA.map((o: { probability: number }) => o.probability)).size).toBeGreaterThan(10)
  }, 60_000)

  it('the pipeline appears in the model metadata; unknown models still 404', async () => {
    for (const base of [fused, remote]) {
      const meta = await (await fetch(`${base}/v2/models/tabular`)).json()
      expect(meta.platform).toBe('cohort_pipeline')
      expect(meta.inputs.map((i: { name: string }) => i.name)).toContain('sex')
      expect((await fetch(`${base}/v2/models/no-such-model`)).status).toBe(404)
    }
  }, 30_000)

  it('a bad row fails alone (422) while the rows batched with it succeed, in both placements', async () => {
    const good = rows(15)
    const bad = { ...good[3], sex: 'unknown' }
    const outOfRange = { ...good[4], age: 500 }
    const inputs = [...good.slice(0, 7), bad, ...good.slice(7), outOfRange]
    for (const base of [fused, remote]) {
      const before = await metrics(base)
      const res = await predictAll(base, 'tabular', inputs)
      const codes = res.map((r) => r.status)
      expect(codes[7]).toBe(422)
      expect(res[7]!.body.error).toMatch(/sex "unknown" is not in the vocabulary/)
      expect(codes[codes.length - 1]).toBe(422)
      expect(codes.filter((c) => c === 200)).toHaveLength(good.length)
      // The preprocess stage ran the bad rows in batches with good ones (fewer batches than rows).
      const after = await metrics(base)
      const key = 'cohort_stage_batch_size_count{pipeline="tabular",stage="preprocess"}'
      const batches = (after.get(key) ?? 0) - (before.get(key) ?? 0)
      expect(batches).toBeGreaterThan(0)
      expect(batches).toBeLessThan(inputs.length)
    }
  }, 60_000)

  it('a request with a schema error gets 422 and never reaches the stages', async () => {
    const r = await postJson(`${remote}/models/tabular/predictions`, { input: { sex: 'male' } })
    expect(r.status).toBe(422)
  }, 30_000)
})

describe('deadlines across stages', () => {
  let fused = ''
  let remote = ''

  beforeAll(async () => {
    const nats = await startNatsServer()
    servers.push(nats)
    await start(['worker', SLEEPY, '--nats', nats.url, '--stage', 'sleep'], /serving/)
    ;[remote, fused] = await Promise.all([serve([SLEEPY, '--nats', nats.url, '--remote', 'sleep']), serve([SLEEPY])])
  }, 3 * START_MS)

  it('a deadline too short gives 504 and the later stage never runs; a long one succeeds', async () => {
    for (const base of [fused, remote]) {
      const short = await postJson(`${base}/models/sleepy-pipeline/predictions`, { input: { sleepMs: 1500, tag: 'x' } }, { 'x-cohort-timeout-ms': '400' })
      expect(short.status, JSON.stringify(short.body)).toBe(504)
      // Let the sleeping batch finish: the item is then dropped before stage `after`.
      await new Promise((r) => setTimeout(r, 1800))
      const m = await metrics(base)
      expect(m.get('cohort_stage_batch_size_count{pipeline="sleepy-pipeline",stage="after"}') ?? 0).toBe(0)
      expect(m.get('cohort_stage_batch_size_count{pipeline="sleepy-pipeline",stage="sleep"}')).toBe(1)
      const ok = await postJson(`${base}/models/sleepy-pipeline/predictions`, { input: { sleepMs: 10, tag: 'y' } })
      expect(ok.status).toBe(200)
      expect(ok.body.output).toEqual({ tag: 'y', after: true })
    }
  }, 60_000)
})

describe('embedded: cohort serve examples/tabular', () => {
  it(
    'answers Cog-style predictions without NATS, the same as over NATS',
    async () => {
      const base = await serve([TABULAR, '--threads', '1'])
      expect(overNats, 'the NATS placement started').not.toBe('')
      const inputs = rows(12)
      const [embedded, nats] = await Promise.all([predictAll(base, 'tabular', inputs), predictAll(overNats, 'tabular', inputs)])
      for (const r of [...embedded, ...nats]) {
        expect(r.status, JSON.stringify(r.body)).toBe(200)
      }
      expect(embedded.map((r) => r.body.output)).toEqual(nats.map((r) => r.body.output))
      expect(new Set(embedded.map((r) => r.body.output.probability)).size, 'outputs depend on the rows').toBeGreaterThan(3)
    },
    2 * START_MS,
  )
})
