import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fillNormal, graph, model, mulberry32, node, normalSampler, tensorInit, valueInfo } from '@cohort/onnx-builder'
import { cacheDir } from '@cohort/cli/demo-model'

/**
 * The model-bound model of `cohort bench overload`: one request is a row of 512 FP32 read as 8
 * tokens of 64, each through the same MLP 64 -> 2560 x4 -> 2 (Relu between), the 8 outputs
 * back into 16 logits. About 159 M multiply-adds per item (11x `heavy`) from 80 MB of weights:
 * every weight is used 8 times per item, so the compute grows without the model file growing
 * with it (a plain MLP's multiply-adds per item equal its weights).
 */
export const DEEP = { tokens: 8, features: 64, hidden: 2560, layers: 4, out: 2 } as const

/** Multiply-adds per item of {@link DEEP}. */
export function deepMacs(d: typeof DEEP = DEEP): number {
  const per = d.features * d.hidden + (d.layers - 1) * d.hidden * d.hidden + d.hidden * d.out
  return d.tokens * per
}

/** The ONNX bytes of {@link DEEP}: input `input` ['batch', 512], output `logits` ['batch', 16]. */
export function buildDeepModel(seed = 11, d: typeof DEEP = DEEP): Uint8Array {
  const normal = normalSampler(mulberry32(seed))
  const sizes = [d.features, ...Array.from({ length: d.layers }, () => d.hidden), d.out]
  const inits = [tensorInit('tok_shape', 'INT64', [2], [-1n, BigInt(d.features)]), tensorInit('out_shape', 'INT64', [2], [-1n, BigInt(d.tokens * d.out)])]
  const nodes = [node('Reshape', ['input', 'tok_shape'], ['tokens'])]
  let prev = 'tokens'
  let k: number = d.features // sizes[l]: the input size of layer l
  for (const [l, n] of sizes.slice(1).entries()) {
    inits.push(tensorInit(`w${l}`, 'FP32', [k, n], fillNormal(k * n, normal, Math.sqrt(2 / k))))
    inits.push(tensorInit(`b${l}`, 'FP32', [n], fillNormal(n, normal, 0.01)))
    const last = l === sizes.length - 2
    nodes.push(node('MatMul', [prev, `w${l}`], [`mm${l}`]))
    nodes.push(node('Add', [`mm${l}`, `b${l}`], [last ? 'per_token' : `pre${l}`]))
    if (!last) {
      nodes.push(node('Relu', [`pre${l}`], [`h${l}`]))
      prev = `h${l}`
    }
    k = n
  }
  nodes.push(node('Reshape', ['per_token', 'out_shape'], ['logits']))
  return model(
    graph({
      name: 'cohort_bench_deep',
      inputs: [valueInfo('input', 'FP32', ['batch', d.tokens * d.features])],
      outputs: [valueInfo('logits', 'FP32', ['batch', d.tokens * d.out])],
      initializers: inits,
      nodes,
    }),
  )
}

/** Path of {@link DEEP} in the model cache (built once; the same bytes on every machine). */
export function ensureDeepModel(): string {
  const path = join(cacheDir(), `bench-deep-${DEEP.tokens}x${DEEP.features}-${DEEP.hidden}x${DEEP.layers}-${DEEP.out}.onnx`)
  if (!existsSync(path)) {
    mkdirSync(cacheDir(), { recursive: true })
    const tmp = `${path}.${process.pid}.tmp`
    writeFileSync(tmp, buildDeepModel())
    renameSync(tmp, path)
  }
  return path
}
