import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as ort from 'onnxruntime-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_EXACT_TOKENS, QUANT, buildClassifierModel, classifierReference, type ClassifierWeights } from './classifier.ts'
import { writeModel } from './model-file.ts'
import { LABELS, syntheticDataset } from './synthetic.ts'
import { encodeText, tokenize, type EncodedText } from './tokenize.ts'
import { argmax, trainClassifier } from './train.ts'
import { ifStarted } from '@cohort/test-support'

let dir: string
let weights: ClassifierWeights
let session: ort.InferenceSession

/** Runs same-length encoded texts as one batch; returns logits per item. */
async function run(items: EncodedText[]): Promise<Float32Array[]> {
  const len = items[0]!.inputIds.length
  const ids = new BigInt64Array(items.length * len)
  const mask = new BigInt64Array(items.length * len)
  items.forEach((e, i) => {
    ids.set(e.inputIds, i * len)
    mask.set(e.attentionMask, i * len)
  })
  const r = await session.run({
    input_ids: new ort.Tensor('int64', ids, [items.length, len]),
    attention_mask: new ort.Tensor('int64', mask, [items.length, len]),
  })
  const z = r['logits']!.data as Float32Array
  return items.map((_, i) => z.slice(i * LABELS.length, (i + 1) * LABELS.length))
}

/** Encoded texts grouped by bucket length, with their indices. */
function byBucket(enc: EncodedText[]): Map<number, number[]> {
  const m = new Map<number, number[]>()
  enc.forEach((e, i) => m.set(e.inputIds.length, [...(m.get(e.inputIds.length) ?? []), i]))
  return m
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cohort-text-'))
  const path = join(dir, 'text.onnx')
  weights = writeModel(path).weights
  session = await ort.InferenceSession.create(path)
}, 60_000) // training takes a few seconds, more on a loaded machine

afterAll(async () => {
  await ifStarted(session)?.release()
  rmSync(dir, { recursive: true, force: true })
})

describe('the trained text classifier (through onnxruntime-node)', () => {
  // Held out: another seed than training's, and twice its cross-class noise.
  const heldOut = syntheticDataset(800, { seed: 1001, noiseRate: 0.1 })

  it('classifies a held-out synthetic set with accuracy >= 0.9, every class >= 0.8', async () => {
    const enc = heldOut.map((e) => encodeText(e.text))
    const pred = new Array<number>(enc.length)
    for (const idx of byBucket(enc).values()) {
      const z = await run(idx.map((i) => enc[i]!))
      idx.forEach((i, k) => (pred[i] = argmax(z[k]!)))
    }
    const acc = (c?: number) => {
      const xs = heldOut.map((e, i) => [e.label, pred[i]] as const).filter(([l]) => c === undefined || l === c)
      return xs.filter(([l, p]) => l === p).length / xs.length
    }
    expect(acc()).toBeGreaterThanOrEqual(0.9)
    for (let c = 0; c < LABELS.length; c++) expect(acc(c), LABELS[c]).toBeGreaterThanOrEqual(0.8)
  })

  it('labels typical headlines as expected', async () => {
    const texts = [
      'The president met foreign diplomats to discuss a ceasefire treaty',
      'The striker scored a late goal to win the championship match',
      'Stocks fell as investors weighed quarterly earnings and inflation',
      'Scientists at nasa launched a satellite with a new processor',
    ]
    for (const [c, t] of texts.entries()) {
      const [z] = await run([encodeText(t)])
      expect(LABELS[argmax(z!)], t).toBe(LABELS[c])
    }
  })

  it('gives the plain-TS reference logits bit for bit', async () => {
    for (const e of heldOut.slice(0, 100)) {
      const [z] = await run([encodeText(e.text)])
      expect(Array.from(z!)).toEqual(Array.from(classifierReference(weights, tokenize(e.text))))
    }
  })

  it('gives the same outputs for an item alone, in a padded bucket batch, and padded to the longest bucket', async () => {
    const texts = heldOut.slice(0, 120).map((e) => e.text)
    const enc = texts.map((t) => encodeText(t))
    const alone = await Promise.all(enc.map(async (e) => (await run([e]))[0]!))
    for (const idx of byBucket(enc).values()) {
      const batched = await run(idx.map((i) => enc[i]!))
      idx.forEach((i, k) => expect(Array.from(batched[k]!)).toEqual(Array.from(alone[i]!)))
    }
    // All 120 in one batch, each padded to 64 tokens: still the same logits.
    const padded = await run(texts.map((t) => encodeText(t, { padTo: MAX_EXACT_TOKENS })))
    padded.forEach((z, i) => expect(Array.from(z)).toEqual(Array.from(alone[i]!)))
  })

  it('keeps the served weights on the exact grids', () => {
    const onGrid = (xs: Float32Array, step: number) => xs.every((x) => Number.isInteger(x / step) && Math.abs(x) <= QUANT.limit)
    expect(onGrid(weights.embedding, QUANT.embeddingStep)).toBe(true)
    expect(onGrid(weights.w, QUANT.wStep)).toBe(true)
    // Worst case |sum of 64 embeddings . w column| in units of the product grid stays below 2^24.
    const units = (MAX_EXACT_TOKENS * weights.dim * QUANT.limit ** 2) / (QUANT.embeddingStep * QUANT.wStep)
    expect(units).toBeLessThan(2 ** 24)
  })
})

describe('trainClassifier', () => {
  it('is deterministic: the same options give the same ONNX bytes', { timeout: 60_000 }, () => {
    const opts = { examples: 200, epochs: 1 }
    const a = buildClassifierModel(trainClassifier(opts).weights)
    const b = buildClassifierModel(trainClassifier(opts).weights)
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true)
    const c = buildClassifierModel(trainClassifier({ ...opts, seed: 8 }).weights)
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false)
  })
})
