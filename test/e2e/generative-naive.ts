// An independent reference for the generative tests: greedy decoding of a builder decoder
// (@cohort/onnx-builder, GroupQueryAttention) by the plainest loop there is. Every step runs the
// whole sequence so far (prompt + output) through onnxruntime-node at batch 1, from an empty KV
// cache, and takes the argmax of the last position's logits. No engine, no KV slab, no reused cache,
// no batching: what the engine's batched, cached decode must agree with.
import { byteTokenizer } from '@cohort/generative'
import type { DecoderConfig } from '@cohort/onnx-builder'
import * as ort from 'onnxruntime-node'

/** A greedy continuation: the generated tokens (the end-of-sequence token excluded), their text and why it ended. */
export interface NaiveResult {
  tokens: number[]
  text: string
  finishReason: 'stop' | 'length'
  /** The log-probability (log-softmax of the raw logits) of each token in `tokens`. */
  logprobs: number[]
}

/** The logits of the last position after running `ids` (positions 0..n-1) with an empty cache. */
async function lastLogits(session: ort.InferenceSession, c: DecoderConfig, ids: number[]): Promise<Float32Array> {
  const n = ids.length
  const hd = c.hidden / c.heads
  const i64 = (a: number[]) => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), [1, n])
  const feeds: Record<string, ort.Tensor> = {
    input_ids: i64(ids),
    attention_mask: i64(ids.map(() => 1)),
    position_ids: i64(ids.map((_, i) => i)),
  }
  // A fresh zeroed past buffer every step: nothing is carried from one step to the next.
  for (let l = 0; l < c.layers; l++) {
    for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor('float32', new Float32Array(c.kvHeads * n * hd), [1, c.kvHeads, n, hd])
  }
  const out = await session.run(feeds, ['logits'])
  const logits = out['logits']!.data as Float32Array
  return logits.subarray((n - 1) * c.vocabSize, n * c.vocabSize)
}

/** First index of the largest value (the engine's tie rule). */
function argmax(row: Float32Array): number {
  let best = 0
  for (let i = 1; i < row.length; i++) if ((row[i] as number) > (row[best] as number)) best = i
  return best
}

/** log softmax(row)[i], in float64. */
function logprob(row: Float32Array, i: number): number {
  let max = -Infinity
  for (const x of row) max = Math.max(max, x)
  let sum = 0
  for (const x of row) sum += Math.exp(x - max)
  return (row[i] as number) - max - Math.log(sum)
}

/**
 * Greedy decode of `prompt` (a string: UTF-8 bytes, the byte tokenizer; or token ids) for at most
 * `maxTokens` tokens; ends early at the model's EOS unless `ignoreEos`.
 */
export async function naiveGreedy(
  session: ort.InferenceSession,
  c: DecoderConfig,
  prompt: string | number[],
  maxTokens: number,
  o: { ignoreEos?: boolean } = {},
): Promise<NaiveResult> {
  const ids = typeof prompt === 'string' ? byteTokenizer.encode(prompt) : [...prompt]
  const tokens: number[] = []
  const logprobs: number[] = []
  while (tokens.length < maxTokens) {
    const row = await lastLogits(session, c, ids)
    const t = argmax(row)
    if (t === c.eosId && !o.ignoreEos) return { tokens, text: byteTokenizer.decode(tokens), finishReason: 'stop', logprobs }
    ids.push(t)
    tokens.push(t)
    logprobs.push(logprob(row, t))
  }
  return { tokens, text: byteTokenizer.decode(tokens), finishReason: 'length', logprobs }
}

/** An ORT session of a built decoder, one thread (the reference is not what is being measured). */
export function naiveSession(model: Uint8Array): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 })
}
