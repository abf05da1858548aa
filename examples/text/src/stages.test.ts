import { ItemError } from '@cohort/pipeline'
import { describe, expect, it } from 'vitest'
import { mergeLogits, postprocessItems, preprocessItems, type Encoded, type TextRequest } from './stages.ts'

describe('preprocessItems', () => {
  it('pads each text to its bucket and carries top_k; a bad item fails alone', () => {
    const items = [
      { text: 'hello world', top_k: 1 },
      { text: '   ', top_k: 2 },
      { text: 'word '.repeat(20), top_k: 3 },
      { text: 7 as unknown as string, top_k: 2 },
      { text: 'word '.repeat(500), top_k: 4 },
    ] satisfies TextRequest[]
    const out = preprocessItems(items)
    expect(out).toHaveLength(5)
    const [a, blank, b, notText, long] = out
    expect(blank).toBeInstanceOf(ItemError)
    expect((blank as ItemError).code).toBe('INVALID_INPUT')
    expect((notText as ItemError).code).toBe('INVALID_INPUT')
    const shape = (e: unknown) => (e as Encoded).tensors['input_ids']!.shape
    expect(shape(a)).toEqual([8])
    expect(shape(b)).toEqual([32])
    expect(shape(long)).toEqual([64])
    expect((a as Encoded).tensors['attention_mask']!.datatype).toBe('INT64')
    expect([a, b, long].map((e) => (e as Encoded).topK)).toEqual([1, 3, 4])
  })
})

describe('mergeLogits and postprocessItems', () => {
  const logits = { datatype: 'FP32' as const, shape: [4], data: new Float32Array([0, 2, 1, 0]) }
  const enc: Encoded = { tensors: {}, topK: 2 }

  it('pass the model error through, or pair the logits with k', () => {
    const err = new ItemError('boom', 'INVALID_INPUT')
    expect(mergeLogits(enc, [err])).toBe(err)
    expect(mergeLogits(enc, [{}])).toBeInstanceOf(Error)
    expect(mergeLogits(enc, [{ logits }])).toEqual({ logits, topK: 2 })
  })

  it('rank the labels, and fail an item with a bad k alone', () => {
    const [ok, bad] = postprocessItems([
      { logits, topK: 2 },
      { logits, topK: 0 },
    ])
    expect(ok).toEqual({ labels: [expect.objectContaining({ label: 'Sports' }), expect.objectContaining({ label: 'Business' })] })
    expect(bad).toBeInstanceOf(ItemError)
  })
})
