import { describe, expect, it } from 'vitest'
import { decodeInferMessage, decodeNotice, decodeReply, decodeRequest, encodeNotice, encodeReply, encodeRequest, encodeValue } from './codec.ts'
import { CohortError } from './errors.ts'
import { generateFrom, MAX_GENERATE_TOKENS } from './generate-codec.ts'
import type { InferRequest } from './envelope.ts'

const gen = { prompt: 'abc', params: { maxTokens: 4, temperature: 0, stop: ['.'], seed: 7 }, stream: true }
const req: InferRequest = { v: 1, id: 'r1', model: 'chars', deadline: Date.now() + 1000, generate: gen }

function badMessage(f: () => unknown): string {
  try {
    f()
  } catch (e) {
    expect(e).toBeInstanceOf(CohortError)
    expect((e as CohortError).code).toBe('BAD_REQUEST')
    return (e as Error).message
  }
  throw new Error('did not throw')
}

describe('generation envelopes', () => {
  it('a request with generate round-trips without tensors or items', () => {
    expect(decodeRequest(encodeRequest(req)).generate).toEqual(gen)
    const m = decodeInferMessage(encodeValue({ v: 2, reqs: [req] }))
    expect(m.v === 2 && m.reqs[0]).toMatchObject({ id: 'r1', generate: gen })
  })

  it('a generation with tensors or items is refused naming both', () => {
    expect(badMessage(() => decodeRequest(encodeRequest({ ...req, items: [1] })))).toMatch(/generate and items/)
  })

  it.each([
    [{ ...gen, prompt: 5 }, /request\.generate\.prompt must be a string or an array of token ids/],
    [{ ...gen, prompt: [1, -1] }, /request\.generate\.prompt as token ids/],
    [{ ...gen, params: { maxTokens: 0 } }, /request\.generate\.params\.maxTokens must be an integer from 1/],
    [{ ...gen, params: { maxTokens: MAX_GENERATE_TOKENS + 1 } }, /maxTokens/],
    [{ ...gen, params: { maxTokens: 2, temperature: 3 } }, /params\.temperature must be a number in \[0, 2\]/],
    [{ ...gen, params: { maxTokens: 2, topP: 0 } }, /params\.topP must be a number in \(0, 1\]/],
    [{ ...gen, params: { maxTokens: 2, stop: [''] } }, /params\.stop must be/],
    [{ ...gen, params: { maxTokens: 2, logprobs: 9 } }, /params\.logprobs must be an integer from 0 to 5/],
    [{ ...gen, stream: 'yes' }, /request\.generate\.stream must be a boolean/],
  ])('bad generate %# is BAD_REQUEST naming the field', (g, msg) => {
    expect(badMessage(() => decodeRequest(encodeRequest({ ...req, generate: g as never })))).toMatch(msg)
  })

  it('API field names replace the wire names in messages', () => {
    expect(badMessage(() => generateFrom({ prompt: 'x', params: { maxTokens: -1 } }, 'body', { maxTokens: 'max_tokens' }))).toMatch(/^max_tokens must be/)
  })

  it('a reply with generated round-trips; a bad one names the field', () => {
    const generated = { text: 'hi', tokens: [104, 105], finishReason: 'length' as const, usage: { promptTokens: 3, completionTokens: 2 } }
    expect(decodeReply(encodeReply({ v: 1, id: 'r1', generated })).generated).toEqual(generated)
    expect(badMessage(() => decodeReply(encodeReply({ v: 1, id: 'r1', generated: { ...generated, finishReason: 'eos' as never } })))).toMatch(/generated\.finishReason/)
  })

  it('tokens notices round-trip and are validated', () => {
    const steps = [
      { id: 'a', tokens: [1, 2], text: 'xy' },
      { id: 'b', tokens: [3], text: 'z', logprobs: [{ token: 3, logprob: -0.5 }] },
    ]
    expect(decodeNotice(encodeNotice({ v: 2, t: 'tokens', steps }))).toEqual({ v: 2, t: 'tokens', steps })
    expect(badMessage(() => decodeNotice(encodeValue({ v: 2, t: 'tokens', steps: [{ id: 1, tokens: [], text: '' }] })))).toMatch(/notice\.steps\[0\]/)
    expect(badMessage(() => decodeNotice(encodeValue({ v: 2, t: 'tokens', steps: [{ id: 'a', tokens: ['x'], text: '' }] })))).toMatch(/steps\[0\]\.tokens/)
  })

  it("logprobs carry their tokens' text and bytes, top alternatives too; bad bytes name the field", () => {
    const logprobs = [{ token: 0xe2, logprob: -0.25, text: '\ufffd', bytes: [0xe2], top: [{ token: 0x61, logprob: -2, text: 'a', bytes: [0x61] }] }]
    const steps = [{ id: 'a', tokens: [0xe2], text: '', logprobs }]
    expect(decodeNotice(encodeNotice({ v: 2, t: 'tokens', steps }))).toEqual({ v: 2, t: 'tokens', steps })
    const bad = [{ id: 'a', tokens: [1], text: '', logprobs: [{ token: 1, logprob: -1, bytes: [300] }] }]
    expect(badMessage(() => decodeNotice(encodeValue({ v: 2, t: 'tokens', steps: bad })))).toMatch(/logprobs\[\]\.bytes/)
  })
})
