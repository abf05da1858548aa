// ONNX models with a fixed leading dimension, served over real NATS by the real CLI: fixed at 1
// means batches of one item; fixed at 4 means batches padded to 4 rows with the pad rows dropped.
// Both under 8 concurrent clients (all 200, every answer its own), both stated in the metadata and
// the Triton config, and a runtime override past the limit refused with 400 naming it.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildFixedBatchModel, graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { pool, spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type JsonBody, type NatsServerHandle, ifStarted } from '@cohort/test-support'

let nats: NatsServerHandle
let serve: CliProcess
let base = ''
let dir = ''

beforeAll(async () => {
  nats = await startNatsServer()
  dir = writeModelFixtures().dir
  writeFileSync(join(dir, 'fixed1.onnx'), buildFixedBatchModel(1))
  writeFileSync(join(dir, 'fixed4.onnx'), buildFixedBatchModel(4))
  serve = spawnCohort([
    'serve',
    '--nats',
    nats.url,
    '--port',
    '0',
    '--model',
    `one=${join(dir, 'fixed1.onnx')},warmup=2`,
    '--model',
    `four=${join(dir, 'fixed4.onnx')},warmup=1x1:4`,
    '--max-batch-size',
    '32',
  ])
  const m = await serve.waitFor(/serving one, four on (http:\/\/[^ ]+) /, 90_000)
  base = m[1]!
}, 120_000)

afterAll(async () => {
  await ifStarted(serve)?.stop()
  await ifStarted(nats)?.stop()
})

async function infer(model: string, rows: number[][]): Promise<{ status: number; body: JsonBody }> {
  const r = await fetch(`${base}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [rows.length, 3], data: rows.flat() }] }),
  })
  return { status: r.status, body: await r.json() }
}

describe('fixed leading dimension', () => {
  it.each(['one', 'four'])(
    'model %s: 8 concurrent clients, every request 200 with its own answer',
    async (name) => {
      const jobs = Array.from({ length: 96 }, (_, i) => i)
      const results = await pool(jobs, 8, async (i) => {
        // Clients send [1, 3]; some send [2, 3] (two items in one request).
        const rows =
          i % 5 === 0
            ? [
                [i, i + 0.5, -i],
                [1, 2, 3],
              ]
            : [[i, i + 0.5, -i]]
        const r = await infer(name, rows)
        return { i, rows, ...r }
      })
      const failed = results.filter((r) => r.status !== 200)
      expect(failed.map((r) => `${r.status} ${JSON.stringify(r.body)}`)).toEqual([])
      for (const r of results) {
        const out = r.body.outputs.find((o: { name: string }) => o.name === 'y')
        expect(out.shape).toEqual([r.rows.length, 3])
        expect(out.data).toEqual(r.rows.flat().map((v) => v * 2 + 0))
      }
    },
    120_000,
  )

  it('metadata and config state the limit and why; the global --max-batch-size does not pass it', async () => {
    const one = await (await fetch(`${base}/v2/models/one/config`)).json()
    const four = await (await fetch(`${base}/v2/models/four/config`)).json()
    expect(one.max_batch_size).toBe(1)
    expect(four.max_batch_size).toBe(4)
    expect(one.parameters.cohort_batch_limit_reason.string_value).toMatch(/fixes its leading dimension at 1/)
    expect(four.parameters.cohort_batch_limit_reason.string_value).toMatch(/padded to 4 rows and the pad rows dropped/)
    expect(four.parameters.cohort_source_maxBatchSize.string_value).toBe('model')
    const meta = await (await fetch(`${base}/v2/models/four`)).json()
    expect(meta.parameters).toEqual({ batch_limit: 4, batch_limit_reason: expect.stringMatching(/padded to 4/) })
  })

  it('a runtime override past the limit is 400 naming it', async () => {
    const r = await fetch(`${base}/admin/models/one/batching`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ maxBatchSize: 8 }),
    })
    expect(r.status).toBe(400)
    expect(await r.text()).toMatch(/limit of 1/)
  })

  it('a model with no batch dimension (fixed leading dims that differ) is refused at load with a clear message', async () => {
    const p = join(dir, 'nobatch.onnx')
    writeFileSync(
      p,
      model(graph({ name: 'nobatch', inputs: [valueInfo('x', 'FP32', [3])], outputs: [valueInfo('s', 'FP32', [1])], nodes: [node('ReduceSum', ['x'], ['s'], { keepdims: 1 })] })),
    )
    const bad = spawnCohort(['serve', '--port', '0', '--model', `nobatch=${p}`])
    expect(await bad.exited).not.toBe(0)
    expect(bad.output()).toMatch(/needs a leading dynamic batch dimension, or one fixed at the same size in every input and output/)
  }, 60_000)
})
