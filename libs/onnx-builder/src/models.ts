/**
 * The ONNX models Cohort ships and tests with, built deterministically in TypeScript.
 * @module
 */
import { graph, model, node, tensorInit, valueInfo, type Datatype } from './onnx.ts'
import { fillNormal, mulberry32, normalSampler } from './random.ts'

/** Layer sizes of the demo MLP: 256 -> 1024 -> 1024 -> 10. */
export const DEMO_MLP_SIZES = [256, 1024, 1024, 10] as const

/** Weights of the demo MLP; matrices are row-major `[in, out]`. */
export interface DemoMlpWeights {
  /** [256 x 1024] */
  readonly w1: Float32Array
  /** [1024] */
  readonly b1: Float32Array
  /** [1024 x 1024] */
  readonly w2: Float32Array
  /** [1024] */
  readonly b2: Float32Array
  /** [1024 x 10] */
  readonly w3: Float32Array
  /** [10] */
  readonly b3: Float32Array
}

/** Standard deviation of the demo MLP's biases. */
const BIAS_STD = 0.01

/**
 * Deterministic demo MLP weights: He init (N(0, 2/fan_in)) for matrices, N(0, 0.01^2) biases,
 * all drawn in order w1, b1, w2, b2, w3, b3 from one mulberry32(seed) Box-Muller stream.
 */
export function demoMlpWeights(seed = 42): DemoMlpWeights {
  const normal = normalSampler(mulberry32(seed))
  const [d0, d1, d2, d3] = DEMO_MLP_SIZES
  const w1 = fillNormal(d0 * d1, normal, Math.sqrt(2 / d0))
  const b1 = fillNormal(d1, normal, BIAS_STD)
  const w2 = fillNormal(d1 * d2, normal, Math.sqrt(2 / d1))
  const b2 = fillNormal(d2, normal, BIAS_STD)
  const w3 = fillNormal(d2 * d3, normal, Math.sqrt(2 / d2))
  const b3 = fillNormal(d3, normal, BIAS_STD)
  return { w1, b1, w2, b2, w3, b3 }
}

/**
 * The demo model "MLP 256 -> 1024 -> 1024 -> 10" (FP32): input `input` ['batch', 256], output
 * `logits` ['batch', 10]; MatMul + Add + Relu per hidden layer, MatMul + Add for the last.
 */
export function buildDemoMlp(seed = 42): Uint8Array {
  const w = demoMlpWeights(seed)
  const [d0, d1, d2, d3] = DEMO_MLP_SIZES
  return model(
    graph({
      name: 'cohort_demo_mlp',
      inputs: [valueInfo('input', 'FP32', ['batch', d0])],
      outputs: [valueInfo('logits', 'FP32', ['batch', d3])],
      initializers: [
        tensorInit('w1', 'FP32', [d0, d1], w.w1),
        tensorInit('b1', 'FP32', [d1], w.b1),
        tensorInit('w2', 'FP32', [d1, d2], w.w2),
        tensorInit('b2', 'FP32', [d2], w.b2),
        tensorInit('w3', 'FP32', [d2, d3], w.w3),
        tensorInit('b3', 'FP32', [d3], w.b3),
      ],
      nodes: [
        node('MatMul', ['input', 'w1'], ['mm1']),
        node('Add', ['mm1', 'b1'], ['pre1']),
        node('Relu', ['pre1'], ['h1']),
        node('MatMul', ['h1', 'w2'], ['mm2']),
        node('Add', ['mm2', 'b2'], ['pre2']),
        node('Relu', ['pre2'], ['h2']),
        node('MatMul', ['h2', 'w3'], ['mm3']),
        node('Add', ['mm3', 'b3'], ['logits']),
      ],
    }),
  )
}

/** y = act(x @ w + b) for `rows` rows, accumulated in float64, each output rounded to float32. */
function dense(x: Float32Array, rows: number, w: Float32Array, b: Float32Array, k: number, n: number, relu: boolean): Float32Array {
  const out = new Float32Array(rows * n)
  const acc = new Float64Array(n)
  for (let r = 0; r < rows; r++) {
    acc.set(b)
    for (let i = 0; i < k; i++) {
      const xv = x[r * k + i] as number
      if (xv === 0) continue
      const base = i * n
      for (let j = 0; j < n; j++) acc[j] = (acc[j] as number) + xv * (w[base + j] as number)
    }
    for (let j = 0; j < n; j++) {
      const v = acc[j] as number
      out[r * n + j] = relu && v < 0 ? 0 : v
    }
  }
  return out
}

/**
 * Plain-JS forward pass of the demo MLP (for tests): `x` is row-major [rows x 256]; returns
 * logits [rows x 10].
 */
export function demoMlpReference(x: Float32Array, rows: number, seed = 42): Float32Array {
  const [d0, d1, d2, d3] = DEMO_MLP_SIZES
  if (x.length !== rows * d0) throw new RangeError(`demoMlpReference: expected ${rows * d0} values, got ${x.length}`)
  const w = demoMlpWeights(seed)
  const h1 = dense(x, rows, w.w1, w.b1, d0, d1, true)
  const h2 = dense(h1, rows, w.w2, w.b2, d1, d2, true)
  return dense(h2, rows, w.w3, w.b3, d2, d3, false)
}

/**
 * A model with several inputs and outputs of different dtypes. Inputs `x` FP32 ['batch', 4] and
 * `ids` INT64 ['batch', 3]; outputs `y` = x * 2 + 1 (FP32 ['batch', 4]), `ids_sq` = ids * ids
 * (INT64 ['batch', 3]) and `x_sum` = ReduceSum(x, axes=[1], keepdims=1) (FP32 ['batch', 1]).
 */
export function buildMultiIoModel(): Uint8Array {
  return model(
    graph({
      name: 'cohort_multi_io',
      inputs: [valueInfo('x', 'FP32', ['batch', 4]), valueInfo('ids', 'INT64', ['batch', 3])],
      outputs: [valueInfo('y', 'FP32', ['batch', 4]), valueInfo('ids_sq', 'INT64', ['batch', 3]), valueInfo('x_sum', 'FP32', ['batch', 1])],
      initializers: [tensorInit('two', 'FP32', [], [2]), tensorInit('one', 'FP32', [], [1]), tensorInit('axis1', 'INT64', [1], [1n])],
      nodes: [
        node('Mul', ['x', 'two'], ['x2']),
        node('Add', ['x2', 'one'], ['y']),
        node('Mul', ['ids', 'ids'], ['ids_sq']),
        node('ReduceSum', ['x', 'axis1'], ['x_sum'], { keepdims: 1 }),
      ],
    }),
  )
}

/** Datatypes in {@link buildIdentityAllTypes}: every Open Inference Protocol datatype. */
export const IDENTITY_DATATYPES: readonly Datatype[] = ['BOOL', 'UINT8', 'INT8', 'UINT16', 'INT16', 'INT32', 'INT64', 'UINT32', 'UINT64', 'FP16', 'FP32', 'FP64', 'BYTES']

/**
 * One Identity per datatype in {@link IDENTITY_DATATYPES}: input `in_<DT>` ['batch', 2] to output
 * `out_<DT>` ['batch', 2] (e.g. `in_FP16` -> `out_FP16`; BYTES is an ONNX STRING tensor).
 */
export function buildIdentityAllTypes(): Uint8Array {
  return model(
    graph({
      name: 'cohort_identity_all_types',
      inputs: IDENTITY_DATATYPES.map((dt) => valueInfo(`in_${dt}`, dt, ['batch', 2])),
      outputs: IDENTITY_DATATYPES.map((dt) => valueInfo(`out_${dt}`, dt, ['batch', 2])),
      nodes: IDENTITY_DATATYPES.map((dt) => node('Identity', [`in_${dt}`], [`out_${dt}`])),
    }),
  )
}

/**
 * A model whose second dimension varies: `tokens` FP32 ['batch', 'seq'] -> `total` FP32
 * ['batch', 1] = ReduceSum over axis 1 (keepdims). Items of different lengths cannot share a batch.
 */
export function buildVariableLengthModel(): Uint8Array {
  return model(
    graph({
      name: 'cohort_variable_length',
      inputs: [valueInfo('tokens', 'FP32', ['batch', 'seq'])],
      outputs: [valueInfo('total', 'FP32', ['batch', 1])],
      initializers: [tensorInit('axis1', 'INT64', [1], [1n])],
      nodes: [node('ReduceSum', ['tokens', 'axis1'], ['total'], { keepdims: 1 })],
    }),
  )
}

/**
 * A masked sequence model for padding tests: inputs `tokens` FP32 ['batch', 'seq'] and
 * `attention_mask` INT64 ['batch', 'seq']; outputs `total` FP32 ['batch', 1] = sum(tokens * mask)
 * over seq, and `scaled` FP32 ['batch', 'seq'] = tokens * mask * 2. Padding positions (mask 0) do not
 * change `total`, and `scaled` cropped to the real length equals the unpadded result.
 */
export function buildMaskedSequenceModel(): Uint8Array {
  return model(
    graph({
      name: 'cohort_masked_sequence',
      inputs: [valueInfo('tokens', 'FP32', ['batch', 'seq']), valueInfo('attention_mask', 'INT64', ['batch', 'seq'])],
      outputs: [valueInfo('total', 'FP32', ['batch', 1]), valueInfo('scaled', 'FP32', ['batch', 'seq'])],
      initializers: [tensorInit('axis1', 'INT64', [1], [1n]), tensorInit('two', 'FP32', [], [2])],
      nodes: [
        node('Cast', ['attention_mask'], ['mask_f'], { to: 1 }),
        node('Mul', ['tokens', 'mask_f'], ['masked']),
        node('ReduceSum', ['masked', 'axis1'], ['total'], { keepdims: 1 }),
        node('Mul', ['masked', 'two'], ['scaled']),
      ],
    }),
  )
}

/**
 * A generic seeded MLP `sizes[0] -> ... -> sizes[n]` (FP32; Relu between layers), input `input`
 * ['batch', sizes[0]], output `logits` ['batch', sizes[n]]. `buildMlp(HEAVY_MLP_SIZES)` (512 -> 2560 x3 -> 16)
 * is the "heavy" benchmark model: about 14.5 M multiply-adds per item.
 */
export function buildMlp(sizes: readonly number[], seed = 7): Uint8Array {
  if (sizes.length < 2) {
    throw new RangeError('buildMlp needs at least an input and an output size')
  }
  const first = sizes[0]
  const lastSize = sizes.at(-1)
  if (first === undefined || lastSize === undefined) {
    throw new RangeError('buildMlp needs at least an input and an output size')
  }
  const normal = normalSampler(mulberry32(seed))
  const inits = []
  const nodes = []
  let prev = 'input'
  let k = first
  for (const [l, n] of sizes.slice(1).entries()) {
    inits.push(tensorInit(`w${l}`, 'FP32', [k, n], fillNormal(k * n, normal, Math.sqrt(2 / k))))
    inits.push(tensorInit(`b${l}`, 'FP32', [n], fillNormal(n, normal, BIAS_STD)))
    const last = l === sizes.length - 2
    nodes.push(node('MatMul', [prev, `w${l}`], [`mm${l}`]))
    nodes.push(node('Add', [`mm${l}`, `b${l}`], [last ? 'logits' : `pre${l}`]))
    if (!last) {
      nodes.push(node('Relu', [`pre${l}`], [`h${l}`]))
      prev = `h${l}`
    }
    k = n
  }
  return model(
    graph({
      name: 'cohort_mlp',
      inputs: [valueInfo('input', 'FP32', ['batch', first])],
      outputs: [valueInfo('logits', 'FP32', ['batch', lastSize])],
      initializers: inits,
      nodes,
    }),
  )
}

/** Layer sizes of the heavy benchmark MLP. */
export const HEAVY_MLP_SIZES = [512, 2560, 2560, 2560, 16] as const

/**
 * A model with a fixed leading dimension: `x` FP32 [rows, 3] -> `y` FP32 [rows, 3] = x * 2.
 * `rows` = 1 is the "batch fixed at 1" export many tools produce.
 */
export function buildFixedBatchModel(rows: number): Uint8Array {
  return model(
    graph({
      name: `cohort_fixed_batch_${rows}`,
      inputs: [valueInfo('x', 'FP32', [rows, 3])],
      outputs: [valueInfo('y', 'FP32', [rows, 3])],
      initializers: [tensorInit('two', 'FP32', [1], [2])],
      nodes: [node('Mul', ['x', 'two'], ['y'])],
    }),
  )
}
