import { describe, expect, it } from 'vitest'
import { CohortError } from '@cohort/protocol'
import { errorBody } from './openai.ts'

describe('OpenAI error bodies', () => {
  it("a prompt over the model's context: OpenAI's code context_length_exceeded, its wording and field names", () => {
    const e = new CohortError('INVALID_INPUT', "prompt (1360 tokens) + maxTokens (4000) exceeds the model's context of 4097 tokens")
    expect(errorBody(e, true)).toEqual({
      error: {
        message:
          "This model's maximum context length is 4097 tokens. However, you requested 5360 tokens (1360 in the messages, 4000 in max_tokens). Please reduce the length of the messages or max_tokens.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    })
    expect(errorBody(e).error).toMatchObject({ param: 'prompt', code: 'context_length_exceeded' })
    expect(errorBody(e).error.message).toContain('(1360 in the prompt, 4000 in max_tokens)')
  })

  it('other errors keep the registry code and the field the message starts with', () => {
    expect(errorBody(new CohortError('INVALID_INPUT', 'temperature must be >= 0, got -1')).error).toEqual({
      message: 'temperature must be >= 0, got -1',
      type: 'invalid_request_error',
      param: 'temperature',
      code: 'INVALID_INPUT',
    })
  })
})
