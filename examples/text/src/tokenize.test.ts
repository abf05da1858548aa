import { describe, expect, it } from 'vitest'
import { DEFAULT_MAX_TOKENS, PAD_ID, VOCAB_SIZE, bucketLength, encodeText, tokenize } from './tokenize.ts'

describe('tokenize', () => {
  it('gives GPT-2 BPE ids (r50k_base)', () => {
    expect(VOCAB_SIZE).toBe(50257)
    expect(tokenize('hello world')).toEqual([31373, 995])
    expect(tokenize('The football team won')).toEqual([464, 4346, 1074, 1839])
  })

  it('encodes special-token text as plain text instead of rejecting it', () => {
    const ids = tokenize('a <|endoftext|> b')
    expect(ids.length).toBeGreaterThan(3)
    expect(ids).not.toContain(50256)
  })

  it('truncates to maxTokens', () => {
    const long = 'word '.repeat(200)
    expect(tokenize(long)).toHaveLength(DEFAULT_MAX_TOKENS)
    expect(tokenize(long, 10)).toHaveLength(10)
  })
})

describe('bucketLength', () => {
  it('rounds up to a power of two between the smallest bucket and maxTokens', () => {
    expect([0, 1, 8, 9, 16, 17, 33, 64, 65].map((n) => bucketLength(n))).toEqual([8, 8, 8, 16, 16, 32, 64, 64, 64])
    expect(bucketLength(30, 24)).toBe(24)
    expect(bucketLength(3, 64, 4)).toBe(4)
  })
})

describe('encodeText', () => {
  it('pads ids and mask to the bucket', () => {
    const e = encodeText('hello world')
    expect(e.length).toBe(2)
    expect(Array.from(e.inputIds)).toEqual([31373n, 995n, ...Array<bigint>(6).fill(BigInt(PAD_ID))])
    expect(Array.from(e.attentionMask)).toEqual([1n, 1n, 0n, 0n, 0n, 0n, 0n, 0n])
  })

  it('pads to padTo when asked, and never below the token count', () => {
    expect(encodeText('hello world', { padTo: 64 }).inputIds).toHaveLength(64)
    expect(() => encodeText('one two three', { padTo: 2 })).toThrow(RangeError)
  })

  it('rejects texts without tokens', () => {
    expect(() => encodeText('')).toThrow(/no tokens/)
    expect(() => encodeText('   \n\t')).toThrow(/no tokens/)
  })
})
