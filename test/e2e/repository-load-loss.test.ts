// Repository loads that lose their worker (docs/repository.md#load-and-unload), over real NATS with
// two worker processes (each its own repository folder) and a gateway. A predictor version whose
// setup() waits for a gate file (writing `<tag>-started` first) holds each load where the test wants:
// - a worker killed with kill -9 while both workers load the version: the load answers once the
//   worker left has loaded it, `lost` names the killed one, and the index says READY (the workers
//   there now all serve it);
// - a worker SIGTERMed while its load's setup() is still running (and would never end): the load
//   is abandoned, the worker exits 0, and the gateway answers 503 WORKER_LOST, not a hang.
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { entry, repositoryApi, until } from './repository-api.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const KEY = 'load-loss-key'
let nats: NatsServerHandle
let wa: CliProcess
let wb: CliProcess
let gateway: CliProcess
let base = ''
/** Under the checkout's ignored tmp/, so the modules resolve `@cohort/predictor`. */
let work = ''
let gates = ''
const api = repositoryApi(() => base, KEY)

/** y = x + k, its setup() held until `gates/<tag>-go` exists (it aborts with the signal). */
function heldSetup(tag: string, k: number): string {
  const g = JSON.stringify(join(gates, tag))
  return `import { existsSync, writeFileSync } from 'node:fs'
import { Type, definePredictor } from '@cohort/predictor'
export default definePredictor({
  name: 'held',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  async setup({ signal }) {
    writeFileSync(${g} + '-started', '')
    while (!existsSync(${g} + '-go')) {
      if (signal.aborted) throw new Error('setup aborted')
      await new Promise((r) => setTimeout(r, 20))
    }
  },
  predict: (inputs) => inputs.map((i) => ({ y: i.x + ${k} })),
})
`
}

/** Write a version atomically (files into a hidden folder, then one rename). */
function putVersion(repo: string, name: string, version: string, file: string, body: string): void {
  const tmp = mkdtempSync(join(repo, '.incoming-'))
  writeFileSync(join(tmp, file), body)
  mkdirSync(join(repo, name), { recursive: true })
  renameSync(tmp, join(repo, name, version))
}

async function waitFile(path: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (!existsSync(path)) {
    if (Date.now() > end) throw new Error(`${path} did not appear within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const repoA = () => join(work, 'a')
const repoB = () => join(work, 'b')

beforeAll(async () => {
  mkdirSync(join(ROOT, 'tmp'), { recursive: true })
  work = mkdtempSync(join(ROOT, 'tmp', 'load-loss-'))
  gates = join(work, 'gates')
  for (const d of [repoA(), repoB(), gates]) mkdirSync(d)
  // Something to serve from the start (the held versions are added later, then loaded on request).
  const quick = heldSetup('quick', 1)
  writeFileSync(join(gates, 'quick-go'), '')
  putVersion(repoA(), 'quick', '1', 'model.ts', quick)
  putVersion(repoB(), 'quick', '1', 'model.ts', quick)
  nats = await startNatsServer()
  wa = spawnCohort(['worker', '--nats', nats.url, '--id', 'wa', '--model-repository', repoA()])
  wb = spawnCohort(['worker', '--nats', nats.url, '--id', 'wb', '--model-repository', repoB()])
  await Promise.all([wa.waitFor(/worker wa serving/, 120_000), wb.waitFor(/worker wb serving/, 120_000)])
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--admin-key', KEY])
  base = (await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000))[1]!
}, 180_000)

afterAll(async () => {
  if (gates && existsSync(gates)) {
    for (const t of ['both-a', 'both-b', 'hung']) writeFileSync(join(gates, `${t}-go`), '')
  }
  await Promise.all(allStarted(wa, wb, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

describe('repository loads that lose their worker', () => {
  it('answers a load whose other worker is killed -9 mid-load, naming it lost; the index is READY on the worker left', async () => {
    putVersion(repoA(), 'both', '1', 'model.ts', heldSetup('both-a', 10))
    putVersion(repoB(), 'both', '1', 'model.ts', heldSetup('both-b', 10))
    const load = api.repoOp('load', 'both')
    await Promise.all([waitFile(join(gates, 'both-a-started')), waitFile(join(gates, 'both-b-started'))])
    const mid = await api.index()
    expect(entry(mid, 'both', '1')?.state, JSON.stringify(mid)).toBe('LOADING')
    wb.proc.kill('SIGKILL')
    await wb.exited
    writeFileSync(join(gates, 'both-a-go'), '')
    const r = await load
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body).toMatchObject({ model: 'both', workers: 2, lost: ['wb'] })
    expect(entry(r.body.versions ?? [], 'both', '1')).toEqual({ name: 'both', version: '1', state: 'READY' })
    const es = await until(
      () => api.index(),
      (es) => entry(es, 'both', '1')?.state === 'READY',
    )
    expect(entry(es, 'both', '1')).toEqual({ name: 'both', version: '1', state: 'READY' })
    const y = await postJson(`${base}/v2/models/both/infer`, { inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [5] }] })
    expect(y.status, JSON.stringify(y.body)).toBe(200)
  }, 120_000)

  it('abandons a load whose setup() is still running when its worker is SIGTERMed: the worker exits 0, the load answers 503 WORKER_LOST', async () => {
    putVersion(repoA(), 'hung', '1', 'model.ts', heldSetup('hung', 20))
    const load = api.repoOp('load', 'hung')
    await waitFile(join(gates, 'hung-started'))
    wa.proc.kill('SIGTERM')
    const [r, code] = await Promise.all([load, wa.exited])
    expect(code, wa.output().slice(-2000)).toBe(0)
    expect(r.status, JSON.stringify(r.body)).toBe(503)
    expect(r.body.code).toBe('WORKER_LOST')
    expect(r.body.error).toMatch(/\(wa\) stopped answering/)
    expect(existsSync(join(gates, 'hung-go')), 'the gate was never opened').toBe(false)
  }, 120_000)
})
