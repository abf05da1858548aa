/**
 * A small GPT-style decoder with a KV cache, in the Hugging Face Optimum naming: `input_ids`,
 * `attention_mask`, `position_ids`, `past_key_values.{i}.key|value` in; `logits`,
 * `present.{i}.key|value` out (KV layout `[batch, kv_heads, seq, head_dim]`). Fixed seeded weights,
 * so a model is a deterministic test fixture, not a trained model.
 *
 * Two attention layouts (docs/generative.md#kv-layout):
 * - `'gqa'`: `com.microsoft.GroupQueryAttention`, as onnxruntime-genai's builder emits it. A past
 *   buffer may be longer than the sequence (a slab row of `maxContext`); row `b` holds its valid
 *   tokens at `[0, len_b)`, right-padded, `seqlens_k = ReduceSum(attention_mask) - 1`. Passing the
 *   same tensor as past and present updates the buffer in place.
 * - `'concat'`: a plain export: `present = Concat(past, new)`, causal + padding mask from
 *   `attention_mask` (left padding), so the cache grows by one row per step and must be re-packed
 *   whenever the batch changes.
 * @module
 */
import { graph, model, node, tensorInit, valueInfo, type NodeSpec, type TensorSpec } from './onnx.ts'
import { fillNormal, mulberry32, normalSampler } from './random.ts'

/** Shape and seed of a {@link buildDecoder} model. */
export interface DecoderConfig {
  /** Tokens in the vocabulary. */
  readonly vocabSize: number
  /** Model width. */
  readonly hidden: number
  readonly layers: number
  /** Query heads; `hidden` must divide by it. */
  readonly heads: number
  /** Key/value heads (GQA); `heads` must divide by it. `'concat'` needs `kvHeads === heads`. */
  readonly kvHeads: number
  /** Longest prompt + output (learned position embeddings). */
  readonly maxContext: number
  /** End-of-sequence token id. */
  readonly eosId: number
  readonly seed: number
  readonly attention: 'gqa' | 'concat'
}

/**
 * The tiny test decoder: 257 tokens (bytes 0-255 plus end-of-sequence 256, the byte tokenizer of
 * `apps/worker/src/generative`), width 64, 2 layers, 4 heads over 2 KV heads, 1024 context.
 */
export const TINY_DECODER: DecoderConfig = {
  vocabSize: 257,
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  maxContext: 1024,
  eosId: 256,
  seed: 1234,
  attention: 'gqa',
}

/** The GPT-2-vocabulary decoder (50257 tokens, `<|endoftext|>` = 50256, gpt-tokenizer's r50k_base): width 64, 2 layers. */
export const GPT2_VOCAB_DECODER: DecoderConfig = {
  vocabSize: 50257,
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  maxContext: 1024,
  eosId: 50256,
  seed: 4321,
  attention: 'gqa',
}

/** Metadata keys {@link buildDecoder} writes (`ModelProto.metadata_props`). */
export const DECODER_METADATA = {
  layout: 'cohort.kv_layout',
  eosId: 'cohort.eos_token_id',
  maxContext: 'cohort.max_context',
} as const

/**
 * Builds the decoder (FP32). Inputs: `input_ids`, `attention_mask`, `position_ids` (INT64,
 * `[batch_size, sequence_length]` / `[batch_size, total_sequence_length]`),
 * `past_key_values.{i}.key|value` (FP32 `[batch_size, kvHeads, past_sequence_length, headDim]`).
 * Outputs: `logits` (`[batch_size, sequence_length, vocabSize]`), `present.{i}.key|value`.
 * Weights: N(0, 1) embeddings scaled by 0.5, projections N(0, 1/fan_in), output head N(0, 9/hidden)
 * so greedy choices have clear margins, drawn in a fixed order from one mulberry32(seed) stream.
 */
export function buildDecoder(c: DecoderConfig): Uint8Array {
  const { hidden: d, heads: h, kvHeads: kvh, vocabSize: v } = c
  if (d % h !== 0 || h % kvh !== 0) throw new RangeError('buildDecoder: hidden % heads and heads % kvHeads must be 0')
  if (c.attention === 'concat' && kvh !== h) throw new RangeError("buildDecoder: 'concat' needs kvHeads === heads")
  const hd = d / h
  const normal = normalSampler(mulberry32(c.seed))
  const inits: TensorSpec[] = []
  const nodes: NodeSpec[] = []
  const w = (name: string, dims: number[], std: number): string => {
    inits.push(
      tensorInit(
        name,
        'FP32',
        dims,
        fillNormal(
          dims.reduce((a, b) => a * b, 1),
          normal,
          std,
        ),
      ),
    )
    return name
  }
  const constant = (name: string, dtype: 'FP32' | 'INT64', dims: number[], data: number[]): string => {
    inits.push(tensorInit(name, dtype, dims, dtype === 'INT64' ? data.map(BigInt) : data))
    return name
  }
  const ones = (name: string): string => constant(name, 'FP32', [d], Array<number>(d).fill(1))
  const zeros = (name: string): string => constant(name, 'FP32', [d], Array<number>(d).fill(0))
  const ln = (x: string, out: string, tag: string): void => {
    nodes.push(node('LayerNormalization', [x, ones(`${tag}.g`), zeros(`${tag}.b`)], [out], { axis: -1 }))
  }

  w('wte', [v, d], 0.5)
  w('wpe', [c.maxContext, d], 0.5)
  nodes.push(node('Gather', ['wte', 'input_ids'], ['tok']))
  nodes.push(node('Gather', ['wpe', 'position_ids'], ['pos']))
  nodes.push(node('Add', ['tok', 'pos'], ['x0']))

  constant('one64', 'INT64', [], [1])
  nodes.push(node('Shape', ['attention_mask'], ['mask_shape']))
  nodes.push(node('Gather', ['mask_shape', 'one64'], ['total64'], { axis: 0 }))
  if (c.attention === 'gqa') {
    constant('axis1', 'INT64', [1], [1])
    nodes.push(node('ReduceSum', ['attention_mask', 'axis1'], ['mask_sum'], { keepdims: 0 }))
    nodes.push(node('Sub', ['mask_sum', 'one64'], ['seqlens64']))
    nodes.push(node('Cast', ['seqlens64'], ['seqlens_k'], { to: 6 }))
    nodes.push(node('Cast', ['total64'], ['total_len'], { to: 6 }))
  } else {
    concatMask(nodes, constant)
  }

  const g: DecoderParts = { nodes, w, constant, ln }
  let x = 'x0'
  for (let i = 0; i < c.layers; i++) {
    x = decoderLayer(g, c, i, x)
  }
  ln(x, 'hf', 'lnf')
  nodes.push(node('MatMul', ['hf', w('wout', [d, v], 3 / Math.sqrt(d))], ['logits']))

  const { inputs, outputs } = decoderIo(c, hd)
  return model(graph({ name: `cohort_decoder_${c.attention}`, inputs, outputs, nodes, initializers: inits }), {
    extraOpsets: c.attention === 'gqa' ? [{ domain: 'com.microsoft', version: 1 }] : [],
    metadata: {
      [DECODER_METADATA.layout]: c.attention === 'gqa' ? 'gqa-shared' : 'concat',
      [DECODER_METADATA.eosId]: String(c.eosId),
      [DECODER_METADATA.maxContext]: String(c.maxContext),
    },
  })
}

type Constant = (name: string, dtype: 'FP32' | 'INT64', dims: number[], data: number[]) => string

/** The graph being built: its nodes, and adders of weights, constants and layer norms. */
interface DecoderParts {
  nodes: NodeSpec[]
  /** A weight N(0, std^2) of `dims`; its name. */
  w: (name: string, dims: number[], std: number) => string
  constant: Constant
  /** LayerNormalization of `x` into `out` (gain and bias named after `tag`). */
  ln: (x: string, out: string, tag: string) => void
}

/** The graph's inputs and outputs (`c.layers` past and present key/value pairs). */
function decoderIo(c: DecoderConfig, hd: number) {
  const kvDims = ['batch_size', c.kvHeads, 'past_sequence_length', hd]
  const presentDims = ['batch_size', c.kvHeads, 'total_sequence_length', hd]
  const inputs = [
    valueInfo('input_ids', 'INT64', ['batch_size', 'sequence_length']),
    valueInfo('attention_mask', 'INT64', ['batch_size', 'total_sequence_length']),
    valueInfo('position_ids', 'INT64', ['batch_size', 'sequence_length']),
  ]
  const outputs = [valueInfo('logits', 'FP32', ['batch_size', 'sequence_length', c.vocabSize])]
  for (let i = 0; i < c.layers; i++) {
    inputs.push(valueInfo(`past_key_values.${i}.key`, 'FP32', kvDims), valueInfo(`past_key_values.${i}.value`, 'FP32', kvDims))
    outputs.push(valueInfo(`present.${i}.key`, 'FP32', presentDims), valueInfo(`present.${i}.value`, 'FP32', presentDims))
  }
  return { inputs, outputs }
}

/** Layer `i` of the decoder on `x` (attention then MLP, each with its residual); its output's name. */
function decoderLayer(g: DecoderParts, c: DecoderConfig, i: number, x: string): string {
  const { nodes, w, constant, ln } = g
  const { hidden: d, heads: h, kvHeads: kvh } = c
  const hd = d / h
  const p = `l${i}`
  ln(x, `${p}.h`, `${p}.ln1`)
  nodes.push(node('MatMul', [`${p}.h`, w(`${p}.wq`, [d, d], 1 / Math.sqrt(d))], [`${p}.q`]))
  nodes.push(node('MatMul', [`${p}.h`, w(`${p}.wk`, [d, kvh * hd], 1 / Math.sqrt(d))], [`${p}.k`]))
  nodes.push(node('MatMul', [`${p}.h`, w(`${p}.wv`, [d, kvh * hd], 1 / Math.sqrt(d))], [`${p}.v`]))
  const past: KvNames = [`past_key_values.${i}.key`, `past_key_values.${i}.value`]
  const present: KvNames = [`present.${i}.key`, `present.${i}.value`]
  if (c.attention === 'gqa') {
    nodes.push(
      node(
        'GroupQueryAttention',
        [`${p}.q`, `${p}.k`, `${p}.v`, past[0], past[1], 'seqlens_k', 'total_len'],
        [`${p}.attn`, present[0], present[1]],
        { num_heads: h, kv_num_heads: kvh },
        { domain: 'com.microsoft' },
      ),
    )
  } else {
    concatAttention(nodes, constant, p, h, hd, past, present)
  }
  nodes.push(node('MatMul', [`${p}.attn`, w(`${p}.wo`, [d, d], 1 / Math.sqrt(d))], [`${p}.o`]))
  nodes.push(node('Add', [x, `${p}.o`], [`${p}.x1`]))
  ln(`${p}.x1`, `${p}.h2`, `${p}.ln2`)
  nodes.push(node('MatMul', [`${p}.h2`, w(`${p}.w1`, [d, 4 * d], Math.sqrt(2 / d))], [`${p}.m1`]))
  nodes.push(node('Relu', [`${p}.m1`], [`${p}.m2`]))
  nodes.push(node('MatMul', [`${p}.m2`, w(`${p}.w2`, [4 * d, d], 1 / Math.sqrt(4 * d))], [`${p}.m3`]))
  nodes.push(node('Add', [`${p}.x1`, `${p}.m3`], [`${p}.x2`]))
  return `${p}.x2`
}

/** A layer's key and value tensor names. */
type KvNames = readonly [key: string, value: string]

/** `mask_bias` [B, 1, S, T]: 0 where query i may see key j (j <= T - S + i and mask[j] = 1), else -1e9. */
function concatMask(nodes: NodeSpec[], constant: Constant): void {
  constant('zero64', 'INT64', [], [0])
  constant('negbig', 'FP32', [], [-1e9])
  constant('zerof', 'FP32', [], [0])
  constant('onef', 'FP32', [], [1])
  constant('axes01', 'INT64', [2], [0, 1])
  constant('axes12', 'INT64', [2], [1, 2])
  constant('axis_last', 'INT64', [1], [-1])
  nodes.push(node('Shape', ['input_ids'], ['ids_shape']))
  nodes.push(node('Gather', ['ids_shape', 'one64'], ['s64'], { axis: 0 }))
  nodes.push(node('Sub', ['total64', 's64'], ['q0']))
  nodes.push(node('Range', ['q0', 'total64', 'one64'], ['qpos']))
  nodes.push(node('Range', ['zero64', 'total64', 'one64'], ['kpos']))
  nodes.push(node('Unsqueeze', ['qpos', 'axis_last'], ['qcol']))
  nodes.push(node('Greater', ['kpos', 'qcol'], ['future'])) // [S, T]
  nodes.push(node('Where', ['future', 'negbig', 'zerof'], ['causal']))
  nodes.push(node('Unsqueeze', ['causal', 'axes01'], ['causal4'])) // [1, 1, S, T]
  nodes.push(node('Cast', ['attention_mask'], ['maskf'], { to: 1 }))
  nodes.push(node('Sub', ['onef', 'maskf'], ['unmask']))
  nodes.push(node('Mul', ['unmask', 'negbig'], ['padbias']))
  nodes.push(node('Unsqueeze', ['padbias', 'axes12'], ['pad4'])) // [B, 1, 1, T]
  nodes.push(node('Add', ['causal4', 'pad4'], ['mask_bias']))
}

function concatAttention(nodes: NodeSpec[], constant: Constant, p: string, h: number, hd: number, past: KvNames, present: KvNames): void {
  const split = constant(`${p}.split`, 'INT64', [4], [0, 0, h, hd])
  const merge = constant(`${p}.merge`, 'INT64', [3], [0, 0, h * hd])
  const scale = constant(`${p}.scale`, 'FP32', [], [1 / Math.sqrt(hd)])
  for (const t of ['q', 'k', 'v']) {
    nodes.push(node('Reshape', [`${p}.${t}`, split], [`${p}.${t}4`]))
    nodes.push(node('Transpose', [`${p}.${t}4`], [`${p}.${t}h`], { perm: [0, 2, 1, 3] }))
  }
  nodes.push(node('Concat', [past[0], `${p}.kh`], [present[0]], { axis: 2 }))
  nodes.push(node('Concat', [past[1], `${p}.vh`], [present[1]], { axis: 2 }))
  nodes.push(node('Transpose', [present[0]], [`${p}.kt`], { perm: [0, 1, 3, 2] }))
  nodes.push(node('MatMul', [`${p}.qh`, `${p}.kt`], [`${p}.s0`]))
  nodes.push(node('Mul', [`${p}.s0`, scale], [`${p}.s1`]))
  nodes.push(node('Add', [`${p}.s1`, 'mask_bias'], [`${p}.s2`]))
  nodes.push(node('Softmax', [`${p}.s2`], [`${p}.pr`], { axis: -1 }))
  nodes.push(node('MatMul', [`${p}.pr`, present[1]], [`${p}.oh`]))
  nodes.push(node('Transpose', [`${p}.oh`], [`${p}.o4`], { perm: [0, 2, 1, 3] }))
  nodes.push(node('Reshape', [`${p}.o4`, merge], [`${p}.attn`]))
}
