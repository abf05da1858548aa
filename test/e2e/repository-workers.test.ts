// The repository index across workers (docs/repository.md#load-and-unload), over real NATS with two
// worker processes, each with its own repository folder, and a gateway: a version one worker serves
// and the other failed to load is not READY, and the index says which worker serves it; once the
// failing worker is killed (kill -9) the index covers the worker left and says READY; a worker
// SIGTERMed while a load it took is running answers the load and exits 0.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildDemoMlp } from '@cohort/onnx-builder'
import { postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { entry, repositoryApi, until, type Entry } from './repository-api.ts'

const KEY = 'workers-admin-key'
let nats: NatsServerHandle
let wa: CliProcess
let wb: CliProcess
let gateway: CliProcess
let base = ''
const good = mkdtempSync(join(tmpdir(), 'cohort-repo-a-'))
const bad = mkdtempSync(join(tmpdir(), 'cohort-repo-b-'))
const api = repositoryApi(() => base, KEY)

function put(repo: string, name: string, bytes: Uint8Array): void {
  mkdirSync(join(repo, name, '1'), { recursive: true })
  writeFileSync(join(repo, name, '1', 'model.onnx'), bytes)
}

beforeAll(async () => {
  put(good, 'mlp', buildDemoMlp(3))
  put(bad, 'mlp', new TextEncoder().encode('not an onnx model'))
  put(good, 'other', buildDemoMlp(4))
  nats = await startNatsServer()
  wa = spawnCohort(['worker', '--nats', nats.url, '--id', 'wa', '--model-repository', good, '--repository-poll-ms', '200'])
  wb = spawnCohort(['worker', '--nats', nats.url, '--id', 'wb', '--model-repository', bad, '--repository-poll-ms', '200'])
  await Promise.all([wa.waitFor(/worker wa serving/, 90_000), wb.waitFor(/worker wb/, 90_000)])
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--admin-key', KEY])
  base = (await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000))[1]!
}, 120_000)

afterAll(async () => {
  await Promise.all(allStarted(wa, wb, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  rmSync(good, { recursive: true, force: true })
  rmSync(bad, { recursive: true, force: true })
})

const infer = (m: string) =>
  postJson(`${base}/v2/models/${m}/infer`, { inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: Array.from({ length: 256 }, () => 0.5) }] })

describe('the repository index over two workers', () => {
  it('is not READY for a version one worker failed to load, and names the worker that serves it', async () => {
    const es = await until(
      () => api.index(),
      (es: Entry[]) => /wb UNAVAILABLE/.test(entry(es, 'mlp', '1')?.reason ?? ''),
    )
    expect(entry(es, 'mlp', '1'), JSON.stringify(es)).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringMatching(/^ready on wa only; wb UNAVAILABLE: failed to load mlp\/1\/model\.onnx/),
    })
    expect(entry(es, 'other', '1')?.state).toBe('READY') // only wa lists it
    expect((await infer('mlp')).status).toBe(200) // wa serves it
    const ready = await fetch(`${base}/v2/repository/index`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: '{"ready":true}' })
    expect(((await ready.json()) as Entry[]).map((e) => e.name)).toEqual(['other'])
    // A load that leaves it served on wa only answers 200 with the entry that says so.
    const load = await api.repoOp('load', 'mlp')
    expect(load.status, JSON.stringify(load.body)).toBe(200)
    expect(entry(load.body.versions ?? [], 'mlp', '1')?.reason).toMatch(/ready on wa only/)
  })

  it('covers only the workers left once one is killed', async () => {
    wb.proc.kill('SIGKILL')
    await wb.exited
    const es = await until(
      () => api.index(),
      (es: Entry[]) => entry(es, 'mlp', '1')?.state === 'READY',
    )
    expect(entry(es, 'mlp', '1')).toEqual({ name: 'mlp', version: '1', state: 'READY' })
  })

  it('answers a load whose worker is SIGTERMed meanwhile, and the worker exits 0', async () => {
    put(good, 'other', buildDemoMlp(5)) // rewrites version 1: the load loads it again
    mkdirSync(join(good, 'other', '2'))
    writeFileSync(join(good, 'other', '2', 'model.onnx'), buildDemoMlp(6)) // and a new version 2
    const load = api.repoOp('load', 'other')
    await new Promise((r) => setTimeout(r, 30)) // the request is on its way or being served
    wa.proc.kill('SIGTERM')
    const [r, code] = await Promise.all([load, wa.exited])
    // On failure, how it ended (a signal: the process did not exit by itself) and its last output.
    expect(code, code === 0 ? '' : `signal ${wa.proc.signalCode}; last output:\n${wa.output().slice(-3000)}`).toBe(0)
    expect([200, 400, 503], JSON.stringify(r)).toContain(r.status)
  })
})
