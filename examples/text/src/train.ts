/**
 * Trains the text classifier on the synthetic data set, reproducibly: seeded init, seeded shuffles,
 * mini-batch Adam over typed arrays (lazy Adam for the embedding rows a batch touches), then rounds
 * the weights to the served grids. A few seconds of CPU. `examples/text/train.ts` is the script.
 * @module
 */
import { fillNormal, mulberry32, normalSampler } from '@cohort/onnx-builder'
import { classifierReference, embedMean, linear, quantizeWeights, type ClassifierWeights } from './classifier.ts'
import { softmax } from './postprocess.ts'
import { LABELS, syntheticDataset } from './synthetic.ts'
import { DEFAULT_MAX_TOKENS, VOCAB_SIZE, tokenize } from './tokenize.ts'

/** Options of {@link trainClassifier}; every default is what the served model uses. */
export interface TrainOptions {
  /** Seed of the weights, the data and the shuffles. @default 7 */
  readonly seed?: number
  /** Training texts. @default 4000 */
  readonly examples?: number
  /** Embedding width. @default 16 */
  readonly dim?: number
  /** Passes over the data. @default 6 */
  readonly epochs?: number
  /** Texts per Adam step. @default 32 */
  readonly batchSize?: number
  /** Adam learning rate. @default 0.05 */
  readonly learningRate?: number
  /** Label smoothing (keeps the scores away from 0 and 1). @default 0.1 */
  readonly labelSmoothing?: number
  /** Tokens kept per text (as in serving). @default 64 */
  readonly maxTokens?: number
}

/** What {@link trainClassifier} returns. */
export interface TrainResult {
  /** The trained weights rounded to the served grids ({@link quantizeWeights}). */
  readonly weights: ClassifierWeights
  /** Mean cross-entropy of the last epoch (before rounding). */
  readonly loss: number
  /** Accuracy of the rounded weights on the training set. */
  readonly trainAccuracy: number
}

const BETA1 = 0.9
const BETA2 = 0.999
const EPS = 1e-8

/** One Adam step on `p[i]` for every i in `idx` (all indices when `idx` is undefined). */
function adam(p: Float32Array, g: Float64Array, m: Float32Array, v: Float32Array, lr: number, t: number, idx?: Iterable<number>): void {
  const c1 = 1 - BETA1 ** t
  const c2 = 1 - BETA2 ** t
  const step = (i: number) => {
    const gi = g[i] as number
    const mi = BETA1 * (m[i] as number) + (1 - BETA1) * gi
    const vi = BETA2 * (v[i] as number) + (1 - BETA2) * gi * gi
    m[i] = mi
    v[i] = vi
    p[i] = (p[i] as number) - (lr * (mi / c1)) / (Math.sqrt(vi / c2) + EPS)
    g[i] = 0
  }
  if (idx) for (const i of idx) step(i)
  else for (let i = 0; i < p.length; i++) step(i)
}

/** Every element index of the given rows of a [rows x dim] matrix. */
function* rowIndices(rows: Iterable<number>, dim: number): Generator<number> {
  for (const r of rows) for (let d = 0; d < dim; d++) yield r * dim + d
}

/** Trains the embedding-bag classifier; deterministic for given options. */
export function trainClassifier(opts: TrainOptions = {}): TrainResult {
  const { seed = 7, examples = 4000, dim = 16, epochs = 6, batchSize = 32, learningRate = 0.05, labelSmoothing = 0.1, maxTokens = DEFAULT_MAX_TOKENS } = opts
  const classes = LABELS.length
  const vocab = VOCAB_SIZE
  const normal = normalSampler(mulberry32(seed))
  const wts: ClassifierWeights = {
    vocab,
    dim,
    classes,
    embedding: fillNormal(vocab * dim, normal, 0.1),
    w: fillNormal(dim * classes, normal, Math.sqrt(1 / dim)),
    b: new Float32Array(classes),
  }
  const data = syntheticDataset(examples, { seed: seed + 1 }).map((e) => ({ ids: tokenize(e.text, maxTokens), label: e.label }))
  const gE = new Float64Array(vocab * dim)
  const gW = new Float64Array(dim * classes)
  const gB = new Float64Array(classes)
  const mE = new Float32Array(vocab * dim)
  const vE = new Float32Array(vocab * dim)
  const mW = new Float32Array(dim * classes)
  const vW = new Float32Array(dim * classes)
  const mB = new Float32Array(classes)
  const vB = new Float32Array(classes)
  const rand = mulberry32(seed + 2)
  const order = data.map((_, i) => i)
  let t = 0
  let loss = 0
  for (let epoch = 0; epoch < epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1))
      ;[order[i], order[j]] = [order[j] as number, order[i] as number]
    }
    loss = 0
    for (let start = 0; start < order.length; start += batchSize) {
      const batch = order.slice(start, start + batchSize)
      const touched = new Set<number>() // embedding rows this batch updates
      for (const k of batch) {
        const { ids, label } = data[k] as (typeof data)[number]
        const h = embedMean(wts, ids)
        const p = softmax(linear(wts, h))
        const target = (c: number) => (c === label ? 1 - labelSmoothing : 0) + labelSmoothing / classes
        p.forEach((pc, c) => (loss -= target(c) * Math.log(Math.max(pc, 1e-12))))
        const gz = p.map((pc, c) => (pc - target(c)) / batch.length)
        for (let d = 0; d < dim; d++) {
          let gh = 0
          for (let c = 0; c < classes; c++) {
            gW[d * classes + c] = (gW[d * classes + c] as number) + (h[d] as number) * (gz[c] as number)
            gh += (wts.w[d * classes + c] as number) * (gz[c] as number)
          }
          for (const id of ids) gE[id * dim + d] = (gE[id * dim + d] as number) + gh / ids.length
        }
        gz.forEach((g, c) => (gB[c] = (gB[c] as number) + g))
        for (const id of ids) touched.add(id)
      }
      t++
      adam(wts.w, gW, mW, vW, learningRate, t)
      adam(wts.b, gB, mB, vB, learningRate, t)
      adam(wts.embedding, gE, mE, vE, learningRate, t, rowIndices(touched, dim))
    }
    loss /= data.length
  }
  const served = quantizeWeights(wts)
  const correct = data.filter(({ ids, label }) => argmax(classifierReference(served, ids)) === label).length
  return { weights: served, loss, trainAccuracy: correct / data.length }
}

/** Index of the largest value (first on ties). */
export function argmax(xs: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < xs.length; i++) if ((xs[i] as number) > (xs[best] as number)) best = i
  return best
}
