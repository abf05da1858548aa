// The text-classification example (examples/text: gpt-tokenizer -> embedding-bag ONNX model ->
// top-k) over real NATS with a gateway and worker processes: the pipeline fused in one worker,
// then with every stage on its own `cohort worker examples/text --stage <s>` process, then embedded
// (`cohort serve examples/text`). All three give identical outputs, equal to the plain-TS
// reference of the trained weights, and bad items fail alone (422, Cog-style) beside good ones.
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pool, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { classifierReference, type ClassifierWeights } from '../../examples/text/src/classifier.ts'
import { topK } from '../../examples/text/src/postprocess.ts'
import { LABELS, syntheticDataset } from '../../examples/text/src/synthetic.ts'
import { tokenize } from '../../examples/text/src/tokenize.ts'
import { trainClassifier } from '../../examples/text/src/train.ts'

const TEXT_DIR = fileURLToPath(new URL('../../examples/text', import.meta.url))
// Worker processes load ORT, the tokenizer and (on first use) train the model on a shared 2-core machine.
const START_MS = 90_000
const STAGES = ['preprocess', 'model', 'postprocess']

// Held-out texts of every length bucket (4..48 words: 8, 16, 32 and 64 tokens), k = 1..4.
const CASES = syntheticDataset(32, { seed: 2024, noiseRate: 0.1 }).map((e, i) => ({ ...e, k: (i % LABELS.length) + 1 }))

interface Prediction {
  labels: { label: string; score: number }[]
}

describe('text pipeline over NATS', { timeout: 180_000 }, () => {
  let nats: NatsServerHandle
  let base: string
  let weights: ClassifierWeights
  const procs: CliProcess[] = []

  const worker = async (args: string[]): Promise<CliProcess> => {
    // --slo-ms: these tests are about outputs; a loaded machine must not turn them into SLO refusals.
    const p = spawnCohort(['worker', TEXT_DIR, '--nats', nats.url, '--threads', '1', '--slo-ms', '30000', ...args])
    procs.push(p)
    await p.waitFor(/serving/, START_MS)
    return p
  }
  const predict = (input: unknown, at = base) => postJson(`${at}/models/text/predictions`, { input })
  /** Every case, 8 requests in flight (so stages batch), in case order. */
  const classifyAll = (at = base): Promise<Prediction[]> =>
    pool(CASES, 8, async (c) => {
      const r = await predict({ text: c.text, top_k: c.k }, at)
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      return r.body.output as Prediction
    })
  /** The first 8 cases as one Open Inference Protocol request of 8 items (BYTES text, INT64 top_k). */
  const inferV2 = async (at = base): Promise<Prediction[]> => {
    const cases = CASES.slice(0, 8)
    const r = await postJson(`${at}/v2/models/text/infer`, {
      inputs: [
        { name: 'text', shape: [cases.length], datatype: 'BYTES', data: cases.map((c) => c.text) },
        { name: 'top_k', shape: [cases.length], datatype: 'INT64', data: cases.map((c) => c.k) },
      ],
    })
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    const labels = (r.body.outputs as { name: string; data: string[] }[]).find((o) => o.name === 'labels')
    return labels!.data.map((j) => ({ labels: JSON.parse(j) }))
  }
  /** Bad items sent together with good ones: each bad one fails alone, the good ones succeed. */
  const badItemsFailAlone = async (at = base) => {
    const good = CASES.slice(0, 4)
    const [empty, blank, notText, badK, ...oks] = await Promise.all([
      predict({ text: '' }, at),
      predict({ text: ' \n\t ' }, at),
      predict({ text: 42 }, at),
      predict({ text: 'a football match', top_k: 9 }, at),
      ...good.map((c) => predict({ text: c.text, top_k: c.k }, at)),
    ])
    for (const r of [empty, blank, notText, badK]) {
      expect(r.status, JSON.stringify(r.body)).toBe(422) // Cog-style: INVALID_INPUT is 422 on /predictions
      expect(r.body.code).toBe('INVALID_INPUT')
    }
    expect(blank.body.error).toMatch(/no tokens/)
    oks.forEach((r, i) => {
      expect(r.status).toBe(200)
      expect(r.body.output).toEqual(expected[i])
    })
  }

  let expected: Prediction[] = []

  beforeAll(async () => {
    weights = trainClassifier().weights // the served model's weights, bit for bit
    expected = CASES.map((c) => ({ labels: topK(classifierReference(weights, tokenize(c.text)), c.k) }))
    nats = await startNatsServer()
    const gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
    procs.push(gw)
    const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
    base = `http://127.0.0.1:${port}`
  }, START_MS)

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  it('the reference labels mean something: most held-out cases get their class first', () => {
    const right = CASES.filter((c, i) => expected[i]!.labels[0]!.label === LABELS[c.label]).length
    expect(right / CASES.length).toBeGreaterThanOrEqual(0.9)
  })

  it('fused in one worker: the reference outputs, and bad items fail alone', async () => {
    const w = await worker(['--id', 'text-fused'])
    const out = await classifyAll()
    expect(out).toEqual(expected)
    expect(await inferV2()).toEqual(expected.slice(0, 8))
    out.forEach((o, i) => expect(o.labels).toHaveLength(CASES[i]!.k))
    await badItemsFailAlone()
    expect(await w.stop('SIGTERM')).toBe(0)
  })

  it('every stage on its own worker (remote placement): identical outputs', async () => {
    await Promise.all(STAGES.map((s) => worker(['--stage', s, '--id', `text-${s}`])))
    await worker([...STAGES.flatMap((s) => ['--remote', s]), '--id', 'text-host'])
    expect(await classifyAll()).toEqual(expected)
    expect(await inferV2()).toEqual(expected.slice(0, 8))
    await badItemsFailAlone()
  })

  it('embedded (cohort serve examples/text, no NATS): identical outputs', async () => {
    const serve = spawnCohort(['serve', TEXT_DIR, '--port', '0', '--threads', '1'])
    procs.push(serve)
    const [, port] = await serve.waitFor(/serving text on http:\/\/127\.0\.0\.1:(\d+)/, START_MS)
    const at = `http://127.0.0.1:${port}`
    expect(await classifyAll(at)).toEqual(expected)
    expect(await inferV2(at)).toEqual(expected.slice(0, 8))
    await badItemsFailAlone(at)
  })
})
