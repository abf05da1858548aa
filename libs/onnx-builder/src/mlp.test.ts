import { describe, expect, it } from 'vitest'
import * as ort from 'onnxruntime-node'
import { buildMlp } from './models.ts'

describe('buildMlp', () => {
  it('builds a seeded MLP of any depth that ORT runs with a dynamic batch', async () => {
    const bytes = buildMlp([8, 16, 4], 3)
    expect(buildMlp([8, 16, 4], 3)).toEqual(bytes)
    const s = await ort.InferenceSession.create(bytes)
    for (const b of [1, 5]) {
      const out = await s.run({ input: new ort.Tensor('float32', new Float32Array(b * 8).fill(0.5), [b, 8]) })
      expect(out['logits']!.dims).toEqual([b, 4])
    }
    expect(() => buildMlp([8])).toThrow(RangeError)
    await s.release()
  })
})
