// Symbolic links in the model repository (docs/repository.md#symbolic-links), over real NATS with a
// worker process holding the repository and a gateway: a model folder or a version's model file that
// is a link leading outside the repository is refused (UNAVAILABLE, the index names the link and its
// target) and never served, on an explicit load as by polling; a link that stays inside is served.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildDemoMlp } from '@cohort/onnx-builder'
import { postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { entry, repositoryApi, until, type Entry } from './repository-api.ts'

const KEY = 'links-admin-key'
let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''
const repo = mkdtempSync(join(tmpdir(), 'cohort-repo-links-'))
const elsewhere = mkdtempSync(join(tmpdir(), 'cohort-elsewhere-'))
const api = repositoryApi(() => base, KEY)

beforeAll(async () => {
  const onnx = buildDemoMlp(7)
  mkdirSync(join(repo, 'plain', '1'), { recursive: true })
  writeFileSync(join(repo, 'plain', '1', 'model.onnx'), onnx)
  // A whole model folder outside, linked in.
  mkdirSync(join(elsewhere, 'linked', '1'), { recursive: true })
  writeFileSync(join(elsewhere, 'linked', '1', 'model.onnx'), onnx)
  symlinkSync(join(elsewhere, 'linked'), join(repo, 'linked'))
  // A version whose model file is a link to a file outside.
  writeFileSync(join(elsewhere, 'x.onnx'), onnx)
  mkdirSync(join(repo, 'filelink', '1'), { recursive: true })
  symlinkSync(join(elsewhere, 'x.onnx'), join(repo, 'filelink', '1', 'model.onnx'))
  // A link that stays inside the repository.
  mkdirSync(join(repo, 'innerlink', '1'), { recursive: true })
  symlinkSync(join(repo, 'plain', '1', 'model.onnx'), join(repo, 'innerlink', '1', 'model.onnx'))
  nats = await startNatsServer()
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'wl', '--model-repository', repo, '--repository-poll-ms', '200'])
  await worker.waitFor(/worker wl serving/, 90_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--admin-key', KEY])
  base = (await gateway.waitFor(/gateway on (http:\/\/[^ ]+) /, 60_000))[1]!
}, 120_000)

afterAll(async () => {
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  rmSync(repo, { recursive: true, force: true })
  rmSync(elsewhere, { recursive: true, force: true })
})

const infer = (m: string) =>
  postJson(`${base}/v2/models/${m}/infer`, { inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: Array.from({ length: 256 }, () => 0.5) }] })

describe('symbolic links in the repository', () => {
  it('serves a link that stays inside the repository', async () => {
    const es = await until(
      () => api.index(),
      (es: Entry[]) => entry(es, 'innerlink', '1')?.state === 'READY' && entry(es, 'plain', '1')?.state === 'READY',
    )
    expect(entry(es, 'innerlink', '1')?.state).toBe('READY')
    expect((await infer('innerlink')).status).toBe(200)
  })

  it('refuses a version whose model file links outside, naming the target', async () => {
    const es = await until(
      () => api.index(),
      (es: Entry[]) => entry(es, 'filelink', '1') !== undefined,
    )
    const e = entry(es, 'filelink', '1')
    expect(e?.state).toBe('UNAVAILABLE')
    expect(e?.reason).toMatch(/1\/model\.onnx resolves to .*x\.onnx, outside the repository/)
    expect((await infer('filelink')).status).not.toBe(200)
  })

  it('refuses a model folder that links outside on an explicit load', async () => {
    const r = await api.repoOp('load', 'linked')
    const es = await api.index()
    const e = entry(es, 'linked', '1')
    expect(e?.state, JSON.stringify({ r, es })).toBe('UNAVAILABLE')
    expect(e?.reason).toMatch(/linked resolves to .*linked, outside the repository/)
    expect((await infer('linked')).status).not.toBe(200)
  })
})
