/**
 * The text classifier: an embedding bag (Gather + masked mean) and a linear layer, as plain
 * TypeScript (for training and tests) and as an ONNX graph written with `@cohort/onnx-builder`.
 * @module
 */
import { graph, model, node, tensorInit, valueInfo } from '@cohort/onnx-builder'

/** Classifier weights; matrices are row-major. */
export interface ClassifierWeights {
  readonly vocab: number
  readonly dim: number
  readonly classes: number
  /** [vocab x dim] token embeddings. */
  readonly embedding: Float32Array
  /** [dim x classes] */
  readonly w: Float32Array
  /** [classes] */
  readonly b: Float32Array
}

/** Names of the ONNX model's inputs and output. */
export const MODEL_IO = { inputIds: 'input_ids', attentionMask: 'attention_mask', logits: 'logits' } as const

/** Sum of the embeddings of `ids` (float64; exact for quantised weights). */
export function embedSum(wts: ClassifierWeights, ids: ArrayLike<number>): Float64Array {
  const h = new Float64Array(wts.dim)
  for (let t = 0; t < ids.length; t++) {
    const base = (ids[t] as number) * wts.dim
    for (let d = 0; d < wts.dim; d++) h[d] = (h[d] as number) + (wts.embedding[base + d] as number)
  }
  return h
}

/** Mean of the embeddings of `ids` (float64). */
export function embedMean(wts: ClassifierWeights, ids: ArrayLike<number>): Float64Array {
  return embedSum(wts, ids).map((x) => x / Math.max(ids.length, 1))
}

/** Logits of the mean embedding `h` (float64). */
export function linear(wts: ClassifierWeights, h: Float64Array): Float64Array {
  const z = Float64Array.from(wts.b)
  for (let d = 0; d < wts.dim; d++) {
    const hd = h[d] as number
    for (let c = 0; c < wts.classes; c++) z[c] = (z[c] as number) + hd * (wts.w[d * wts.classes + c] as number)
  }
  return z
}

/**
 * Grids of the served weights. Embeddings are multiples of 1/64 in [-3, 3] and `w` multiples of
 * 1/16 in [-3, 3], so for up to {@link MAX_EXACT_TOKENS} tokens every masked sum and every dot
 * product is exact in float32 (at most 23 significant bits): the logits do not depend on the
 * summation order, hence not on padding, batch size or ORT's kernels. Only the final division by
 * the token count and the bias add round, once each.
 */
export const QUANT = { embeddingStep: 1 / 64, wStep: 1 / 16, limit: 3 } as const

/** Longest text (in tokens) for which the logits are exact as described in {@link QUANT}. */
export const MAX_EXACT_TOKENS = 64

function quantize(xs: Float32Array, step: number, limit: number): Float32Array {
  return xs.map((x) => Math.max(-limit, Math.min(limit, Math.round(x / step) * step)))
}

/** The weights rounded to the grids of {@link QUANT} (the bias stays as it is). */
export function quantizeWeights(wts: ClassifierWeights): ClassifierWeights {
  return {
    ...wts,
    embedding: quantize(wts.embedding, QUANT.embeddingStep, QUANT.limit),
    w: quantize(wts.w, QUANT.wStep, QUANT.limit),
  }
}

/**
 * Plain-TS forward pass for one unpadded text, in the ONNX graph's order: (sum of embeddings) x w,
 * divided by the token count, plus b, each step rounded to float32 like ORT does. With quantised
 * weights ({@link quantizeWeights}) this equals the ONNX model's logits bit for bit.
 */
export function classifierReference(wts: ClassifierWeights, ids: ArrayLike<number>): Float32Array {
  const sum = embedSum(wts, ids)
  const z = new Float32Array(wts.classes)
  for (let c = 0; c < wts.classes; c++) {
    let dot = 0
    for (let d = 0; d < wts.dim; d++) dot += (sum[d] as number) * (wts.w[d * wts.classes + c] as number)
    z[c] = Math.fround(Math.fround(dot) / Math.max(ids.length, 1)) + (wts.b[c] as number)
  }
  return z
}

/**
 * The classifier as ONNX (opset 17): inputs `input_ids` and `attention_mask`, INT64 ['batch', 'seq'];
 * output `logits` FP32 ['batch', classes] = (masked sum of Gather(embedding, ids)) x w / token count
 * + b, i.e. the mean embedding times `w` plus `b`. Padding positions (mask 0) do not change the result.
 */
export function buildClassifierModel(wts: ClassifierWeights): Uint8Array {
  const { inputIds, attentionMask, logits } = MODEL_IO
  return model(
    graph({
      name: 'cohort_text_classifier',
      inputs: [valueInfo(inputIds, 'INT64', ['batch', 'seq']), valueInfo(attentionMask, 'INT64', ['batch', 'seq'])],
      outputs: [valueInfo(logits, 'FP32', ['batch', wts.classes])],
      initializers: [
        tensorInit('embedding', 'FP32', [wts.vocab, wts.dim], wts.embedding),
        tensorInit('w', 'FP32', [wts.dim, wts.classes], wts.w),
        tensorInit('b', 'FP32', [wts.classes], wts.b),
        tensorInit('axis1', 'INT64', [1], [1n]),
        tensorInit('axis_last', 'INT64', [1], [-1n]),
        tensorInit('one', 'FP32', [], [1]),
      ],
      nodes: [
        node('Gather', ['embedding', inputIds], ['emb'], { axis: 0 }), // [B, S, D]
        node('Cast', [attentionMask], ['mask_f'], { to: 1 }), // FLOAT [B, S]
        node('Unsqueeze', ['mask_f', 'axis_last'], ['mask_3d']), // [B, S, 1]
        node('Mul', ['emb', 'mask_3d'], ['emb_masked']),
        node('ReduceSum', ['emb_masked', 'axis1'], ['emb_sum'], { keepdims: 0 }), // [B, D]
        node('MatMul', ['emb_sum', 'w'], ['sum_logits']), // [B, C]; linear, so = mean x w x count
        node('ReduceSum', ['mask_f', 'axis1'], ['count'], { keepdims: 1 }), // [B, 1]
        node('Max', ['count', 'one'], ['count_safe']),
        node('Div', ['sum_logits', 'count_safe'], ['mean_logits']),
        node('Add', ['mean_logits', 'b'], [logits]),
      ],
    }),
  )
}
