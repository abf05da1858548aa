import { describe, expect, it } from 'vitest'
import { chatLogprobs, completionLogprobs } from './openai-logprobs.ts'

const lps = [
  { token: 104, logprob: -0.1, text: 'hé', bytes: [104, 195, 169], top: [{ token: 7, logprob: -0.05, text: 'x', bytes: [120] }] },
  { token: 9, logprob: -2 }, // a generator that sent no text or bytes
]

describe('OpenAI logprobs shapes', () => {
  it('completions: tokens, their logprobs, the alternatives plus the chosen token, character offsets from `offset`', () => {
    const { value, next } = completionLogprobs(lps, 5)
    expect(value).toEqual({
      tokens: ['hé', 'token_id:9'],
      token_logprobs: [-0.1, -2],
      top_logprobs: [{ x: -0.05, hé: -0.1 }, { 'token_id:9': -2 }],
      text_offset: [5, 7],
    })
    expect(next).toBe(7 + 'token_id:9'.length)
  })

  it('chat: each token with its bytes and top alternatives; bytes of a token without them are its text in UTF-8', () => {
    expect(chatLogprobs(lps)).toEqual({
      content: [
        { token: 'hé', logprob: -0.1, bytes: [104, 195, 169], top_logprobs: [{ token: 'x', logprob: -0.05, bytes: [120] }] },
        { token: 'token_id:9', logprob: -2, bytes: [...new TextEncoder().encode('token_id:9')], top_logprobs: [] },
      ],
      refusal: null,
    })
  })
})
