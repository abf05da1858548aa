// Every model GET /v2/models lists answers its own metadata and config (a new user walks the
// list; docs/pipelines.md: stage workers are not models). Over real NATS, with the tabular
// pipeline's stages on a `cohort worker --stage` process and the demo ONNX model beside it.
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { getJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const TABULAR = fileURLToPath(new URL('../../examples/tabular', import.meta.url))
const START_MS = 90_000

let nats: NatsServerHandle
const procs: CliProcess[] = []
let base = ''

beforeAll(
  async () => {
    nats = await startNatsServer()
    const stages = spawnCohort(['worker', TABULAR, '--nats', nats.url, '--stage', 'preprocess', '--stage', 'mlp', '--stage', 'postprocess', '--threads', '1'])
    procs.push(stages)
    await stages.waitFor(/serving/, START_MS)
    const serve = spawnCohort([
      'serve',
      TABULAR,
      '--nats',
      nats.url,
      '--port',
      '0',
      '--model',
      'demo',
      '--threads',
      '1',
      '--remote',
      'preprocess',
      '--remote',
      'mlp',
      '--remote',
      'postprocess',
    ])
    procs.push(serve)
    base = (await serve.waitFor(/serving .* on (http:\/\/127\.0\.0\.1:\d+)/, START_MS))[1]!
  },
  2 * START_MS + 10_000,
)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

describe('GET /v2/models walk', () => {
  it('lists the models but not the pipeline stages served beside them', async () => {
    const list = await getJson(`${base}/v2/models`)
    expect(list.status).toBe(200)
    const names = (list.body.models as { name: string }[]).map((m) => m.name)
    expect(names).toEqual(['demo', 'tabular'])
  })

  it('every listed entry answers metadata and config (no 404), with one platform name', async () => {
    const { body } = await getJson(`${base}/v2/models`)
    expect(body.models.length).toBeGreaterThan(0)
    for (const entry of body.models as { name: string; platform: string }[]) {
      const meta = await getJson(`${base}/v2/models/${entry.name}`)
      expect(meta.status, `${entry.name}: ${JSON.stringify(meta.body)}`).toBe(200)
      expect(meta.body.name).toBe(entry.name)
      const config = await getJson(`${base}/v2/models/${entry.name}/config`)
      expect(config.status, `${entry.name} config: ${JSON.stringify(config.body)}`).toBe(200)
      expect(config.body.platform, `${entry.name}: metadata and config name the same platform`).toBe(meta.body.platform)
      expect(entry.platform).toBe(meta.body.platform)
    }
    const platforms = Object.fromEntries((body.models as { name: string; platform: string }[]).map((m) => [m.name, m.platform]))
    expect(platforms).toEqual({ demo: 'onnxruntime_onnx', tabular: 'cohort_pipeline' })
  })

  it('the eager policy reports no queue delay in the Triton config', async () => {
    const config = await getJson(`${base}/v2/models/demo/config`)
    expect(config.body.parameters.cohort_policy.string_value).toBe('eager')
    expect(config.body.dynamic_batching.max_queue_delay_microseconds).toBe(0)
  })
})
