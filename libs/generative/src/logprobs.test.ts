// Logprobs of the engine: each output token's log-probability under the model, its top
// alternatives, and each token's text and bytes (what the OpenAI routes show).
import type { GenerateResult, TokenDelta } from '@cohort/protocol'
import { describe, expect, it } from 'vitest'
import { byteTokenizer } from './byte-tokenizer.ts'
import { Engine } from './engine.ts'
import type { DecoderSession, DecoderSpec, TensorLike } from './session.ts'

const V = 257
const SPEC: DecoderSpec = { layers: 1, kvHeads: 1, headDim: 2, vocabSize: V, maxContext: 64, eosId: 256, layout: 'gqa-shared' }

/** Logits: 10 for t + 1, 5 for t + 2, 0 elsewhere (t = the input token). */
const session: DecoderSession = {
  async run(feeds: Record<string, TensorLike>): Promise<Record<string, TensorLike>> {
    await Promise.resolve()
    const ids = feeds['input_ids'] as TensorLike
    const [b, sLen] = ids.dims as [number, number]
    const logits = new Float32Array(b * sLen * V)
    for (let i = 0; i < b * sLen; i++) {
      const t = Number((ids.data as BigInt64Array)[i])
      logits[i * V + ((t + 1) % 256)] = 10
      logits[i * V + ((t + 2) % 256)] = 5
    }
    return { logits: { type: 'float32', data: logits, dims: [b, sLen, V] } }
  },
}

describe('Engine logprobs', () => {
  it("gives each output token's logprob, its top alternatives, and their text and bytes, streamed and in the result", async () => {
    const e = new Engine({ session, model: SPEC, tokenizer: byteTokenizer })
    const deltas: TokenDelta[] = []
    let result: GenerateResult | undefined
    // 0x60 then 'a', 'b'; 0xe1 then 0xe2: an incomplete character alone.
    e.submit({ prompt: [0x60], params: { maxTokens: 2, temperature: 0, logprobs: 2 }, stream: true }, 1e15, {
      delta: (d) => deltas.push(d),
      done: (r) => (result = r),
      error: (x) => expect.fail(x.message),
    })
    while (await e.step()) {
      // until idle
    }
    const lse = Math.log(Math.exp(10) + Math.exp(5) + (V - 2))
    expect(result?.logprobs).toHaveLength(2)
    const [a] = result!.logprobs!
    expect(a).toMatchObject({ token: 0x61, text: 'a', bytes: [0x61] })
    expect(a!.logprob).toBeCloseTo(10 - lse, 5)
    expect(a!.top?.map((t) => [t.token, t.text, t.bytes])).toEqual([
      [0x61, 'a', [0x61]],
      [0x62, 'b', [0x62]],
    ])
    expect(a!.top?.[1]?.logprob).toBeCloseTo(5 - lse, 5)
    expect(deltas.flatMap((d) => d.logprobs ?? [])).toEqual(result!.logprobs)

    let split: GenerateResult | undefined
    e.submit({ prompt: [0xe1], params: { maxTokens: 1, temperature: 0, logprobs: 0 }, stream: false }, 1e15, {
      delta: () => undefined,
      done: (r) => (split = r),
      error: (x) => expect.fail(x.message),
    })
    while (await e.step()) {
      // until idle
    }
    expect(split?.logprobs).toEqual([{ token: 0xe2, logprob: expect.any(Number) as number, text: '\ufffd', bytes: [0xe2] }])
    await e.close()
  })
})
