import * as ort from 'onnxruntime-node'
import { describe, expect, it } from 'vitest'
import { buildDecoder, TINY_DECODER, type DecoderConfig } from './decoder.ts'

const cfg: DecoderConfig = { ...TINY_DECODER, kvHeads: TINY_DECODER.heads }
const hd = cfg.hidden / cfg.heads
const i64 = (a: number[], dims: number[]) => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), dims)

function feeds(ids: number[], start: number, past: (len: number, layerKv: string) => ort.Tensor): Record<string, ort.Tensor> {
  const f: Record<string, ort.Tensor> = {
    input_ids: i64(ids, [1, ids.length]),
    attention_mask: i64(Array(start + ids.length).fill(1), [1, start + ids.length]),
    position_ids: i64(
      ids.map((_, i) => start + i),
      [1, ids.length],
    ),
  }
  for (let l = 0; l < cfg.layers; l++) for (const kv of ['key', 'value']) f[`past_key_values.${l}.${kv}`] = past(start, `${l}.${kv}`)
  return f
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length)
  let w = 0
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs((a[i] as number) - (b[i] as number)))
  return w
}

describe('test decoder (KV cache, Optimum names)', () => {
  it('is byte-identical across builds and declares the Optimum inputs and outputs', async () => {
    expect(Buffer.from(buildDecoder(cfg)).equals(Buffer.from(buildDecoder(cfg)))).toBe(true)
    const s = await ort.InferenceSession.create(buildDecoder(TINY_DECODER))
    expect(s.inputNames).toEqual([
      'input_ids',
      'attention_mask',
      'position_ids',
      'past_key_values.0.key',
      'past_key_values.0.value',
      'past_key_values.1.key',
      'past_key_values.1.value',
    ])
    expect(s.outputNames).toEqual(['logits', 'present.0.key', 'present.0.value', 'present.1.key', 'present.1.value'])
    await s.release()
  })

  it('GQA slab and concat layouts give the same logits, and a step with a past equals the full prompt', async () => {
    const gqa = await ort.InferenceSession.create(buildDecoder(cfg))
    const cat = await ort.InferenceSession.create(buildDecoder({ ...cfg, attention: 'concat' }))
    const prompt = [10, 200, 33, 47, 90, 5]
    // concat: whole prompt, then prompt[:-1] + one step with its present as past
    const full = await cat.run(feeds(prompt, 0, () => new ort.Tensor('float32', new Float32Array(0), [1, cfg.kvHeads, 0, hd])))
    const head = await cat.run(feeds(prompt.slice(0, -1), 0, () => new ort.Tensor('float32', new Float32Array(0), [1, cfg.kvHeads, 0, hd])))
    const step = await cat.run(feeds(prompt.slice(-1), prompt.length - 1, (_n, lk) => head[`present.${lk}`] as ort.Tensor))
    const v = cfg.vocabSize
    const fullLast = (full['logits']!.data as Float32Array).slice((prompt.length - 1) * v)
    expect(maxDiff(step['logits']!.data as Float32Array, fullLast)).toBeLessThan(1e-4)
    // GQA: one shared slab row of 16 tokens, prefill 5 then one step, updated in place
    const slab = new Map<string, ort.Tensor>()
    const row = (_n: number, lk: string) => {
      if (!slab.has(lk)) slab.set(lk, new ort.Tensor('float32', new Float32Array(cfg.kvHeads * 16 * hd), [1, cfg.kvHeads, 16, hd]))
      return slab.get(lk) as ort.Tensor
    }
    const fetch = (): Record<string, ort.Tensor | null> => Object.fromEntries([['logits', null], ...[...slab].map(([k, t]) => [`present.${k}`, t])])
    const f0 = feeds(prompt.slice(0, -1), 0, row)
    const g0 = await gqa.run(f0, fetch())
    const g1 = await gqa.run(feeds(prompt.slice(-1), prompt.length - 1, row), fetch())
    expect(maxDiff(g0['logits']!.data as Float32Array, head['logits']!.data as Float32Array)).toBeLessThan(1e-4)
    expect(maxDiff(g1['logits']!.data as Float32Array, fullLast)).toBeLessThan(1e-4)
    // the slab row holds exactly prompt.length tokens of keys (rows past it stay zero)
    const k0 = slab.get('0.key')!.data as Float32Array
    const used = Array.from({ length: 16 }, (_, t) => k0.subarray(t * hd, (t + 1) * hd).some((x) => x !== 0))
    expect(used.lastIndexOf(true)).toBe(prompt.length - 1)
    await gqa.release()
    await cat.release()
  })
})
