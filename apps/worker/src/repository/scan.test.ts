import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { parseModelConfig } from './model-config.ts'
import { checkConfigFor, importConfig, pipelineVersion, predictorVersion } from './modules.ts'
import { scanModel } from './scan.ts'

const repo = mkdtempSync(join(tmpdir(), 'cohort-scan-'))
afterAll(() => rmSync(repo, { recursive: true, force: true }))

function put(path: string, text = 'x'): string {
  const p = join(repo, path)
  mkdirSync(join(p, '..'), { recursive: true })
  writeFileSync(p, text)
  return p
}

describe('repository scan', () => {
  it('tells ONNX, predictor and pipeline versions by their entry file, and refuses a folder holding two', async () => {
    put('m/1/model.onnx')
    put('m/2/model.ts')
    put('m/3/model.mjs')
    put('m/4/pipeline.ts')
    put('m/5/model.onnx')
    put('m/5/model.ts')
    put('m/6/model.ts')
    put('m/6/model.js')
    put('m/7/weights.bin')
    put('m/v8/model.onnx')
    const s = await scanModel(repo, 'm')
    const by = Object.fromEntries((s?.versions ?? []).map((v) => [v.version, v]))
    expect(Object.keys(by).sort()).toEqual(['1', '2', '3', '4', '5', '6', '7'])
    expect([by['1']?.kind, by['2']?.kind, by['3']?.kind, by['4']?.kind]).toEqual(['onnx', 'predictor', 'predictor', 'pipeline'])
    expect(by['2']?.file).toBe(join(repo, 'm', '2', 'model.ts'))
    expect([by['5']?.kind, by['5']?.file]).toEqual([undefined, undefined])
    expect(by['5']?.conflict).toMatch(/^model\.onnx and model\.ts in one version folder: a version holds one of model\.onnx, model\.\{ts,mts,js,mjs\}/)
    expect(by['6']?.conflict).toMatch(/^model\.js and model\.ts in one version folder/)
    expect([by['7']?.kind, by['7']?.conflict]).toEqual([undefined, undefined])
    expect(s?.ignored).toEqual(['v8'])
    expect(s?.config).toBeUndefined()
  })

  it('takes config.json or config.ts (one of them): two are a conflict naming both', async () => {
    put('j/1/model.onnx')
    put('j/config.json', '{"batching": {"maxBatchSize": 4}}')
    const j = await scanModel(repo, 'j')
    expect([j?.config?.name, j?.config?.text, j?.configConflict]).toEqual(['config.json', '{"batching": {"maxBatchSize": 4}}', undefined])
    put('t/1/model.onnx')
    put('t/config.ts', 'export default { batching: { maxBatchSize: 3 } }')
    const t = await scanModel(repo, 't')
    expect([t?.config?.name, t?.config?.text]).toEqual(['config.ts', undefined])
    put('t/config.json', '{}')
    const both = await scanModel(repo, 't')
    expect(both?.config).toBeUndefined()
    expect(both?.configConflict).toBe('t has config.json and config.ts: keep one configuration file')
  })
})

describe('repository config modules', () => {
  it('a config module default-exports what config.json holds, validated the same way; a changed file is imported afresh', async () => {
    const f = put('c/config.mjs', 'export default { versionPolicy: "all", batching: { maxBatchSize: 3, policy: "timer" } }')
    expect(parseModelConfig(await importConfig(f, 'a'), 'config.mjs')).toEqual({ versionPolicy: { all: true }, batching: { maxBatchSize: 3, policy: 'timer' } })
    writeFileSync(f, 'export default { batching: { maxBatchSize: 100000 } }')
    expect(() => parseModelConfig(undefined)).not.toThrow()
    const raw = await importConfig(f, 'b')
    expect(() => parseModelConfig(raw, 'config.mjs')).toThrow(/batching: invalid value for maxBatchSize: 100000/)
    writeFileSync(f, 'export const nope = 1')
    await expect(importConfig(f, 'c')).rejects.toThrow(/config\.mjs must `export default` the configuration/)
    expect(() => parseModelConfig(7, 'config.ts')).toThrow(/config\.ts must export default an object/)
  })

  it('refuses ONNX-only fields for predictors (and padding, processes, warmup for pipelines), naming them', () => {
    const c = parseModelConfig({ batching: { maxBatchSize: 2 }, ep: 'cpu', padding: { padValue: 0 } })
    expect(() => checkConfigFor('predictor', c, 'p/config.json')).toThrow(
      'p/config.json sets ep, padding, which a predictor does not take (a predictor takes versionPolicy, batching)',
    )
    expect(() => checkConfigFor('pipeline', parseModelConfig({ ep: 'cpu', threads: 2, instances: 1 }), 'q/config.ts')).not.toThrow()
    expect(() => checkConfigFor('pipeline', parseModelConfig({ warmup: 'off' }), 'q/config.ts')).toThrow(/q\/config\.ts sets warmup, which a pipeline does not take/)
    expect(() => checkConfigFor('predictor', parseModelConfig({ versionPolicy: { latest: 2 }, batching: { sloMs: 100 } }), 'p/config.json')).not.toThrow()
  })

  it('a version module must export exactly one predictor or one pipeline', async () => {
    const none = put('p/1/model.mjs', 'export const x = 1')
    await expect(predictorVersion('p', none, '1')).rejects.toThrow(/exports no predictor/)
    const noPipe = put('q/1/pipeline.mjs', 'export default { models: [] }')
    await expect(pipelineVersion('q', noPipe, '1', { onnx: {} })).rejects.toThrow(/must `export default definePipeline/)
  })
})

describe('symbolic links leading outside the repository', () => {
  it('refuses them by default and follows them with allowLinksOutside', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'scan-links-'))
    const out = mkdtempSync(join(tmpdir(), 'scan-out-'))
    try {
      writeFileSync(join(out, 'm.onnx'), 'x')
      mkdirSync(join(repo, 'm', '1'), { recursive: true })
      symlinkSync(join(out, 'm.onnx'), join(repo, 'm', '1', 'model.onnx'))
      const refused = (await scanModel(repo, 'm'))!.versions[0]!
      expect(refused.file).toBeUndefined()
      expect(refused.conflict).toMatch(/1\/model\.onnx resolves to .*m\.onnx, outside the repository/)
      const allowed = (await scanModel(repo, 'm', { allowLinksOutside: true }))!.versions[0]!
      expect(allowed.conflict).toBeUndefined()
      expect(allowed.kind).toBe('onnx')
    } finally {
      rmSync(repo, { recursive: true, force: true })
      rmSync(out, { recursive: true, force: true })
    }
  })
})
