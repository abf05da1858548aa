// The bench's model-bound model: each token of a row goes through the same MLP (checked against a
// plain reference on a small instance in onnxruntime-node), and its size in multiply-adds.
import { describe, expect, it } from 'vitest'
import * as ort from 'onnxruntime-node'
import { buildDeepModel, deepMacs, type DEEP } from './overload-model.ts'

describe('the deep bench model', () => {
  it('runs every token of a row through one MLP and puts the outputs back in token order', async () => {
    const d = { tokens: 3, features: 2, hidden: 4, layers: 2, out: 1 } as unknown as typeof DEEP
    const bytes = buildDeepModel(5, d)
    const s = await ort.InferenceSession.create(bytes)
    // Tokens 0 and 2 are equal, token 1 differs: outputs 0 and 2 must be equal, and 1 not.
    const rows = [0.5, -1, 2, 3, 0.5, -1, 1, 1, 1, 1, 1, 1]
    const r = await s.run({ input: new ort.Tensor('float32', Float32Array.from(rows), [2, 6]) })
    const y = r['logits']!
    expect(y.dims).toEqual([2, 3])
    const v = Array.from(y.data as Float32Array)
    expect(v[0]).toBeCloseTo(v[2]!, 6)
    expect(v[1]).not.toBeCloseTo(v[0]!, 3)
    expect(v[3]).toBeCloseTo(v[4]!, 6)
    expect(v[4]).toBeCloseTo(v[5]!, 6)
    await s.release()
  })

  it('does about 159 M multiply-adds per item, 11x the heavy MLP (14.5 M)', () => {
    expect(deepMacs()).toBe(8 * (64 * 2560 + 3 * 2560 * 2560 + 2560 * 2))
    expect(Math.round(deepMacs() / 1e6)).toBe(159)
  })
})
