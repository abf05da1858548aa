import type { GenerateResult, GenerationSink, SamplingParams, TokenDelta, WireError } from '@cohort/protocol'
import { describe, expect, it } from 'vitest'
import { byteTokenizer } from './byte-tokenizer.ts'
import { Engine, type EngineOptions } from './engine.ts'
import type { DecoderSession, DecoderSpec, TensorLike } from './session.ts'

const V = 257
const SPEC: DecoderSpec = { layers: 1, kvHeads: 1, headDim: 2, vocabSize: V, maxContext: 256, eosId: 256, layout: 'gqa-shared' }

/**
 * A fake decoder: the next token after `t` is `script(t)` (default t + 1 mod 256). It checks the
 * feeds it gets (ids and positions line up, past and present are the same buffer) and counts runs.
 */
function fakeSession(script: (t: number) => number = (t) => (t + 1) % 256): DecoderSession & { runs: number; rows: number[] } {
  const s = {
    runs: 0,
    rows: [] as number[],
    async run(feeds: Record<string, TensorLike>, fetches: Record<string, TensorLike | null>): Promise<Record<string, TensorLike>> {
      await Promise.resolve()
      const ids = feeds['input_ids'] as TensorLike
      const [b, sLen] = ids.dims as [number, number]
      if (fetches['present.0.key'] !== feeds['past_key_values.0.key']) throw new Error('present is not bound to past')
      s.runs++
      s.rows.push(b)
      const logits = new Float32Array(b * sLen * V)
      for (let r = 0; r < b; r++) {
        for (let j = 0; j < sLen; j++) {
          const t = Number((ids.data as BigInt64Array)[r * sLen + j])
          logits[(r * sLen + j) * V + script(t)] = 10
        }
      }
      return { logits: { type: 'float32', data: logits, dims: [b, sLen, V] } }
    },
  }
  return s
}

interface Got {
  deltas: TokenDelta[]
  result?: GenerateResult
  error?: WireError
}
function sink(): GenerationSink & { got: Got } {
  const got: Got = { deltas: [] }
  return { got, delta: (d) => got.deltas.push(d), done: (r) => (got.result = r), error: (e) => (got.error = e) }
}

function engine(o: Partial<EngineOptions> = {}): Engine {
  return new Engine({ session: fakeSession(), model: SPEC, tokenizer: byteTokenizer, ...o })
}

const P = (maxTokens: number, more: Partial<SamplingParams> = {}): SamplingParams => ({ maxTokens, temperature: 0, ...more })
const FAR = 1e15

async function drain(e: Engine): Promise<void> {
  for (let i = 0; i < 10_000 && (await e.step()); i++) {
    // steps until idle
  }
}

describe('Engine (fake session)', () => {
  it('a cancelled generation frees its slot at the next step, and a waiting one takes it', async () => {
    const e = engine({ maxSequences: 2 })
    const a = sink()
    const b = sink()
    const c = sink()
    const ha = e.submit({ prompt: [1], params: P(100, { ignoreEos: true }), stream: true }, FAR, a)
    e.submit({ prompt: [50], params: P(100, { ignoreEos: true }), stream: true }, FAR, b)
    e.submit({ prompt: [90], params: P(3), stream: false }, FAR, c)
    await e.step()
    await e.step()
    expect(e.counts).toEqual({ waiting: 1, prefill: 0, decode: 2, freeSlots: 0 })
    ha.cancel()
    expect(e.counts.decode).toBe(2) // not before the next step
    await e.step()
    expect(a.got.result?.finishReason).toBe('cancelled')
    expect(e.counts.waiting).toBe(0)
    expect(e.counts.decode + e.counts.prefill).toBe(2) // c took a's slot
    await drain(e)
    expect(c.got.result?.tokens).toEqual([91, 92, 93])
    await e.close()
  })

  it('deadlines on a fake clock: no slot by the first-token deadline is 503 OVERLOADED; past the deadline mid-generation ends `deadline` with the output so far', async () => {
    let now = 1000
    const e = engine({ now: () => now, ttftTimeoutMs: 50, maxSequences: 1 })
    const late = sink()
    const slow = sink()
    const ok = sink()
    e.submit({ prompt: [1], params: P(100, { ignoreEos: true }), stream: true }, 1100, late)
    e.submit({ prompt: [2], params: P(2), stream: false }, FAR, slow) // waits behind `late`, no first token in 50 ms
    await e.step()
    await e.step()
    expect(late.got.deltas.length).toBeGreaterThan(0)
    now = 1060
    await e.step()
    expect(slow.got.error).toMatchObject({ code: 'OVERLOADED', retryAfterS: 1 })
    expect(slow.got.error?.message).toMatch(/no slot within the time-to-first-token budget of 50 ms \(1 sequences running, 0 waiting ahead\)/)
    const before = e.metrics().generatedTokens
    now = 1100
    e.submit({ prompt: [3], params: P(2), stream: false }, FAR, ok)
    await drain(e)
    // The deadline ended `late` with what it had: its streamed deltas add up to the result.
    expect(late.got.error).toBeUndefined()
    expect(late.got.result?.finishReason).toBe('deadline')
    expect(late.got.result?.tokens).toHaveLength(before)
    expect(late.got.deltas.flatMap((d) => d.tokens)).toEqual(late.got.result?.tokens)
    expect(ok.got.result?.tokens).toEqual([4, 5])
    expect(e.metrics().finished).toMatchObject({ error: 1, deadline: 1, length: 1 })
    await e.close()
  })

  it("a request's firstTokenDeadline: a waiting sequence is refused 503 at it and frees nothing else; one with its first token is not judged by it", async () => {
    let now = 0
    const e = engine({ now: () => now, maxSequences: 2 })
    const a = sink()
    const b = sink()
    const c = sink()
    e.submit({ prompt: [1], params: P(100, { ignoreEos: true }), stream: true, firstTokenDeadline: 10 }, FAR, a)
    e.submit({ prompt: [2], params: P(100, { ignoreEos: true }), stream: true, firstTokenDeadline: 10 }, FAR, b)
    e.submit({ prompt: [3], params: P(5), stream: true, firstTokenDeadline: 10 }, FAR, c) // no slot
    await e.step()
    expect(e.counts).toMatchObject({ waiting: 1, freeSlots: 0 })
    now = 10
    await e.step()
    expect(c.got.error?.code).toBe('OVERLOADED')
    expect(c.got.deltas).toEqual([])
    expect(e.counts).toMatchObject({ waiting: 0, decode: 2 })
    now = 1000 // long past their first-token deadline: they have their first token
    await e.step()
    expect(a.got.error).toBeUndefined()
    expect(b.got.error).toBeUndefined()
    expect(e.counts.decode).toBe(2)
    await e.close()
  })

  it('prefilling at its first-token deadline: 504 when its own prefill pace says it cannot make it alone, else 503', async () => {
    // A session whose runs take 1 ms per token on the fake clock.
    let now = 0
    const base = fakeSession()
    const timed: DecoderSession = {
      async run(feeds, fetches) {
        now += (feeds['input_ids'] as TensorLike).dims.reduce((x, y) => x * y, 1)
        return base.run(feeds, fetches)
      },
    }
    // 100-token prompt in 10-token chunks: 100 ms alone, against a 50 ms budget -> 504.
    const e = new Engine({ session: timed, model: SPEC, tokenizer: byteTokenizer, now: () => now, maxStepTokens: 10 })
    const long = sink()
    e.submit({ prompt: Array.from({ length: 100 }, (_, i) => i), params: P(3), stream: true, firstTokenDeadline: 50 }, FAR, long)
    await drain(e)
    expect(long.got.error?.code).toBe('DEADLINE_EXCEEDED')
    expect(long.got.error?.message).toMatch(/prompt of 100 tokens takes about 100 ms to prefill, not less than its time-to-first-token budget of 50 ms/)
    await e.close()
    // 40-token prompt (40 ms alone) behind a 100-token one sharing the step budget: late by overload -> 503.
    now = 0
    const f = new Engine({ session: timed, model: SPEC, tokenizer: byteTokenizer, now: () => now, maxStepTokens: 10 })
    const first = sink()
    const second = sink()
    f.submit({ prompt: Array.from({ length: 100 }, (_, i) => i), params: P(3), stream: true }, FAR, first)
    f.submit({ prompt: Array.from({ length: 40 }, (_, i) => i), params: P(3), stream: true, firstTokenDeadline: 60 }, FAR, second)
    await drain(f)
    expect(first.got.result?.finishReason).toBe('length')
    expect(second.got.error?.code).toBe('OVERLOADED')
    expect(second.got.error?.message).toMatch(/still prefilling \(0 of 40 prompt tokens\) at the end of the time-to-first-token budget of 60 ms/)
    await f.close()
  })

  it('announces its server SLO in info (default: a TTFT SLO only); a bad one is a RangeError', () => {
    expect(engine().info.slo).toEqual({ ttftMs: 10_000 })
    expect(engine({ slo: { ttftMs: 500, generationMs: 60_000 } }).info.slo).toEqual({ ttftMs: 500, generationMs: 60_000 })
    expect(engine({ slo: { generationMs: 60_000 } }).info.slo).toEqual({ ttftMs: 10_000, generationMs: 60_000 })
    expect(() => engine({ slo: { ttftMs: 0 } })).toThrow(/slo.ttftMs must be a positive number of ms/)
  })

  it('stop strings match across token boundaries and are not sent; held text comes later', async () => {
    const e = engine()
    const s = sink()
    // "abcdefg...": stop "de" spans two tokens
    e.submit({ prompt: [0x60], params: P(20, { stop: ['de'] }), stream: true }, FAR, s)
    await drain(e)
    expect(s.got.result?.text).toBe('abc')
    expect(s.got.result?.finishReason).toBe('stop')
    expect(s.got.deltas.map((d) => d.text).join('')).toBe('abc')
    // the "d" was held back in the step it arrived
    expect(s.got.deltas.some((d) => d.tokens.includes(0x64) && d.text === '')).toBe(true)
    await e.close()
  })

  it('a stop string that never completes is released; stop ids and EOS end with stop, maxTokens with length', async () => {
    const e = engine()
    const a = sink()
    const b = sink()
    const c = sink()
    e.submit({ prompt: [0x60], params: P(4, { stop: ['dx'] }), stream: true }, FAR, a)
    e.submit({ prompt: [0x30], params: P(10, { stopTokenIds: [0x33] }), stream: false }, FAR, b)
    e.submit({ prompt: [254], params: P(10), stream: false }, FAR, c) // 254 -> 255 -> 0: no EOS in this script
    await drain(e)
    expect(a.got.result).toMatchObject({ text: 'abcd', finishReason: 'length' })
    expect(a.got.deltas.map((d) => d.text).join('')).toBe('abcd')
    expect(b.got.result).toMatchObject({ tokens: [0x31, 0x32], finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 3 } })
    expect(c.got.result?.finishReason).toBe('length')
    await e.close()
  })

  it('EOS ends a generation unless ignoreEos', async () => {
    const e = new Engine({ session: fakeSession(() => 256), model: SPEC, tokenizer: byteTokenizer })
    const a = sink()
    const b = sink()
    e.submit({ prompt: [5], params: P(3), stream: false }, FAR, a)
    e.submit({ prompt: [5], params: P(3, { ignoreEos: true }), stream: false }, FAR, b)
    await drain(e)
    expect(a.got.result).toMatchObject({ tokens: [], finishReason: 'stop' })
    expect(b.got.result).toMatchObject({ tokens: [256, 256, 256], finishReason: 'length' })
    await e.close()
  })

  it('multi-byte characters split across tokens are held until complete', async () => {
    const bytes = Array.from(new TextEncoder().encode('é€'))
    let i = 0
    const e = new Engine({ session: fakeSession(() => bytes[i++] ?? 0x21), model: SPEC, tokenizer: byteTokenizer })
    const s = sink()
    e.submit({ prompt: [1], params: P(bytes.length), stream: true }, FAR, s)
    await drain(e)
    expect(s.got.result?.text).toBe('é€')
    expect(s.got.deltas.every((d) => !d.text.includes('\uFFFD'))).toBe(true)
    expect(s.got.deltas.map((d) => d.text).join('')).toBe('é€')
    await e.close()
  })

  it('an output ending in an incomplete character has the same final text streamed or not', async () => {
    // 0xE2 0x82 starts a three-byte character that never completes (maxTokens 3: '!' then the two bytes).
    for (const stream of [true, false]) {
      const bytes = [0x21, 0xe2, 0x82]
      let i = 0
      const e = new Engine({ session: fakeSession(() => bytes[i++] ?? 0x21), model: SPEC, tokenizer: byteTokenizer })
      const s = sink()
      e.submit({ prompt: [1], params: P(bytes.length), stream }, FAR, s)
      await drain(e)
      expect(s.got.result?.text, `stream: ${stream}`).toBe(byteTokenizer.decode(bytes))
      if (stream) expect(s.got.deltas.map((d) => d.text).join('')).toBe(s.got.result?.text)
      await e.close()
    }
  })

  it('seeded sampling: a sequence preempted under a small KV budget and recomputed samples the same tokens as its seed alone', async () => {
    // Spread logits (a hash of the last token and its position), so sampling at temperature 1 has
    // many likely tokens and every PRNG draw shows in the output.
    const spread = (): DecoderSession => ({
      async run(feeds) {
        await Promise.resolve()
        const ids = feeds['input_ids'] as TensorLike
        const pos = feeds['position_ids'] as TensorLike
        const [b, sLen] = ids.dims as [number, number]
        const logits = new Float32Array(b * sLen * V)
        for (let i = 0; i < b * sLen; i++) {
          const t = Number((ids.data as BigInt64Array)[i])
          const q = Number((pos.data as BigInt64Array)[i])
          for (let k = 0; k < 256; k++) logits[i * V + k] = ((Math.imul(t * 977 + q * 131 + k, 2654435761) >>> 0) % 1000) / 250
        }
        return { logits: { type: 'float32', data: logits, dims: [b, sLen, V] } }
      },
    })
    const model: DecoderSpec = { ...SPEC, maxContext: 64 }
    const params = P(40, { temperature: 1, seed: 1234, ignoreEos: true })
    const seeded = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    const preemptions: number[] = []
    const run = async (o: Partial<EngineOptions>, others: number[][]): Promise<Got> => {
      const e = new Engine({ session: spread(), model, tokenizer: byteTokenizer, ...o, observer: { finished: (f) => void preemptions.push(f.preemptions) } })
      // The others come first: the seeded sequence, admitted last, is the one preempted.
      for (const p of others) e.submit({ prompt: p, params: P(40, { temperature: 1, seed: p[0], ignoreEos: true }), stream: false }, FAR, sink())
      const s = sink()
      e.submit({ prompt: seeded, params, stream: true }, FAR, s)
      await drain(e)
      await e.close()
      return s.got
    }
    const alone = await run({ maxSequences: 1 }, [])
    expect(preemptions).toEqual([0])
    expect(alone.result?.tokens).toHaveLength(40)
    expect(new Set(alone.result?.tokens).size).toBeGreaterThan(20) // sampled, not a fixed point
    preemptions.length = 0
    // 64 KV tokens for two sequences of 10 + 40: both are admitted, the later one is preempted at
    // 2 x 33 > 64 and recomputed once the first has ended.
    const squeezed = await run({ maxSequences: 2, kvBudgetTokens: 64 }, [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
    expect(preemptions).toEqual([0, 1]) // the first ran through; the seeded one was preempted once
    expect(squeezed.error).toBeUndefined()
    expect(squeezed.result?.tokens).toEqual(alone.result?.tokens)
    // What it had streamed before the preemption is not streamed again.
    expect(squeezed.deltas.flatMap((d) => d.tokens)).toEqual(alone.result?.tokens)
  })

  it('runs one batched decode per step over every decoding sequence', async () => {
    const session = fakeSession()
    const e = new Engine({ session, model: SPEC, tokenizer: byteTokenizer, maxStepTokens: 64 })
    for (let k = 0; k < 5; k++) e.submit({ prompt: [k * 10], params: P(6), stream: false }, FAR, sink())
    await e.step() // 5 prefills (batch 1 each)
    expect(session.rows).toEqual([1, 1, 1, 1, 1])
    await e.step()
    expect(session.rows.slice(5)).toEqual([5])
    await drain(e)
    await e.close()
  })

  it('request-level batching admits a new batch only when the running one is done', async () => {
    const e = engine({ batching: 'request', maxSequences: 4 })
    const long = sink()
    e.submit({ prompt: [1], params: P(10), stream: false }, FAR, long)
    e.submit({ prompt: [1], params: P(2), stream: false }, FAR, sink())
    await e.step()
    const late = sink()
    e.submit({ prompt: [1], params: P(2), stream: false }, FAR, late)
    for (let k = 0; k < 5; k++) await e.step()
    expect(e.counts.waiting).toBe(1) // a slot is free but the batch is still running
    await drain(e)
    expect(late.got.result?.tokens).toEqual([2, 3])
    await e.close()
  })

  it('rejects requests that can never run with INVALID_INPUT naming the limit; close fails the rest retryably', async () => {
    const e = engine()
    expect(() => e.submit({ prompt: [1], params: P(256), stream: false }, FAR, sink())).toThrow(/context of 256 tokens/)
    expect(() => e.submit({ prompt: [300], params: P(2), stream: false }, FAR, sink())).toThrow(/outside the vocabulary/)
    expect(() => e.submit({ prompt: [], params: P(2), stream: false }, FAR, sink())).toThrow(/empty/)
    expect(() => e.submit({ prompt: [1], params: P(2, { topP: 0 }), stream: false }, FAR, sink())).toThrow(/topP/)
    try {
      e.submit({ prompt: [1], params: P(0), stream: false }, FAR, sink())
    } catch (err) {
      expect((err as { code: string; status: number }).status).toBe(400)
    }
    const s = sink()
    e.submit({ prompt: [1], params: P(50), stream: false }, FAR, s)
    e.start()
    await e.close()
    await e.close()
    expect(s.got.error?.code).toBe('WORKER_LOST')
    expect(() => e.submit({ prompt: [1], params: P(2), stream: false }, FAR, sink())).toThrow(/closed/)
  })

  it('a failing session run fails only the sequences in that run', async () => {
    let fail = false
    const base = fakeSession()
    const session: DecoderSession = {
      run: (f, o) => (fail && (f['input_ids'] as TensorLike).dims[1] === 3 ? Promise.reject(new Error('boom')) : base.run(f, o)),
    }
    const e = new Engine({ session, model: SPEC, tokenizer: byteTokenizer })
    const a = sink()
    e.submit({ prompt: [1], params: P(5), stream: false }, FAR, a)
    await e.step()
    fail = true
    const b = sink()
    e.submit({ prompt: [7, 8, 9], params: P(5), stream: false }, FAR, b)
    await drain(e)
    expect(b.got.error).toMatchObject({ code: 'INTERNAL' })
    expect(a.got.result?.tokens).toEqual([2, 3, 4, 5, 6])
    await e.close()
  })
})
