import { buildDecoder, TINY_DECODER } from '@cohort/onnx-builder'
import { byteTokenizer, Engine, type EngineOptions } from '@cohort/generative'
import type { GenerateResult, GenerationSink, SamplingParams, TokenDelta, WireError } from '@cohort/protocol'
import * as ort from 'onnxruntime-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ortDecoderSession } from './ort-session.ts'

const SPEC = {
  layers: TINY_DECODER.layers,
  kvHeads: TINY_DECODER.kvHeads,
  headDim: TINY_DECODER.hidden / TINY_DECODER.heads,
  vocabSize: TINY_DECODER.vocabSize,
  maxContext: TINY_DECODER.maxContext,
  eosId: TINY_DECODER.eosId,
  layout: 'gqa-shared' as const,
}
let session: ort.InferenceSession

beforeAll(async () => {
  session = await ort.InferenceSession.create(buildDecoder(TINY_DECODER), { intraOpNumThreads: 1, interOpNumThreads: 1 })
})
afterAll(async () => {
  await session.release()
})

function engine(o: Partial<EngineOptions> = {}): Engine {
  return new Engine({ session: ortDecoderSession(session), model: SPEC, tokenizer: byteTokenizer, ...o })
}

interface Collected {
  deltas: TokenDelta[]
  result?: GenerateResult
  error?: WireError
}

function sink(): GenerationSink & { got: Collected } {
  const got: Collected = { deltas: [] }
  return { got, delta: (d) => got.deltas.push(d), done: (r) => (got.result = r), error: (e) => (got.error = e) }
}

/** A tiny PRNG for the test's own choices (prompt lengths, arrival steps). */
function rand(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a * 1664525 + 1013904223) >>> 0
    return a / 2 ** 32
  }
}

function prompt(r: () => number, len: number): number[] {
  return Array.from({ length: len }, () => Math.floor(r() * 256))
}

async function runAlone(p: number[], params: SamplingParams): Promise<GenerateResult> {
  const e = engine({ maxSequences: 1 })
  const s = sink()
  e.submit({ prompt: p, params, stream: false }, Date.now() + 600_000, s)
  while (await e.step()) {
    // one sequence at a time
  }
  await e.close()
  expect(s.got.error).toBeUndefined()
  return s.got.result as GenerateResult
}

const GREEDY = (maxTokens: number): SamplingParams => ({ maxTokens, temperature: 0, ignoreEos: true })

describe('continuous batching on the ORT test decoder (GQA slab)', () => {
  it('greedy: every sequence joining and leaving at random steps equals its prompt decoded alone', async () => {
    const r = rand(7)
    const reqs = Array.from({ length: 10 }, (_, i) => ({
      prompt: prompt(r, 1 + Math.floor(r() * 90)),
      params: GREEDY(2 + Math.floor(r() * 30)),
      at: Math.floor(r() * 40),
      i,
    }))
    const alone: GenerateResult[] = []
    for (const q of reqs) alone.push(await runAlone(q.prompt, q.params))
    // Every prompt's continuation differs from the others', so a sequence given another's row cannot pass.
    expect(new Set(alone.map((a) => a.tokens.join(','))).size).toBe(reqs.length)
    // small step budget so prompts prefill in several chunks while others decode
    const e = engine({ maxSequences: 4, maxStepTokens: 24 })
    const sinks = reqs.map(() => sink())
    let step = 0
    let maxRunning = 0
    while (step < 1000) {
      for (const q of reqs) if (q.at === step) e.submit({ prompt: q.prompt, params: q.params, stream: true }, Date.now() + 600_000, sinks[q.i]!)
      const more = await e.step()
      maxRunning = Math.max(maxRunning, e.counts.decode)
      step++
      if (!more && step > 40) break
    }
    await e.close()
    expect(maxRunning).toBeGreaterThan(1)
    expect(e.metrics().kvRowMoves).toBeGreaterThan(0)
    reqs.forEach((q, i) => {
      const got = sinks[i]!.got
      expect(got.error).toBeUndefined()
      expect(got.result?.tokens, `request ${i}`).toEqual(alone[i]!.tokens)
      expect(got.result?.finishReason).toBe('length')
      expect(got.deltas.flatMap((d) => d.tokens)).toEqual(alone[i]!.tokens)
    })
  }, 60_000)

  it('seeded sampling reproduces, alone and batched with others', async () => {
    const params: SamplingParams = { maxTokens: 20, temperature: 0.9, topK: 40, topP: 0.95, seed: 99, ignoreEos: true }
    const p = Array.from(new TextEncoder().encode('Once upon a time'))
    const a = await runAlone(p, params)
    const b = await runAlone(p, params)
    expect(b.tokens).toEqual(a.tokens)
    const c = await runAlone(p, { ...params, seed: 100 })
    expect(c.tokens).not.toEqual(a.tokens)
    const e = engine({ maxSequences: 3 })
    const s = [sink(), sink(), sink()]
    e.submit({ prompt: [1, 2, 3, 4, 5, 6, 7, 8], params: { ...params, seed: 5 }, stream: false }, Date.now() + 600_000, s[0]!)
    await e.step()
    e.submit({ prompt: p, params, stream: false }, Date.now() + 600_000, s[1]!)
    e.submit({ prompt: [9, 9, 9], params: { ...params, seed: 6 }, stream: false }, Date.now() + 600_000, s[2]!)
    while (await e.step()) {
      // run to the end
    }
    await e.close()
    expect(s[1]!.got.result?.tokens).toEqual(a.tokens)
  }, 60_000)

  it.each([
    ['greedy', (): SamplingParams => GREEDY(40)],
    ['seeded sampling', (i: number): SamplingParams => ({ maxTokens: 40, temperature: 1, seed: 500 + i, ignoreEos: true })],
  ])(
    'preemption under a small KV budget recomputes and still matches %s alone',
    async (_name, paramsOf) => {
      const r = rand(11)
      const reqs = Array.from({ length: 5 }, (_, i) => ({ prompt: prompt(r, 20 + Math.floor(r() * 30)), params: paramsOf(i) }))
      const alone: GenerateResult[] = []
      for (const q of reqs) alone.push(await runAlone(q.prompt, q.params))
      // a context of 128 lets the budget be 150 tokens: 4 sequences of 60-90 tokens cannot all stay
      const preempted: number[] = []
      const e = engine({
        model: { ...SPEC, maxContext: 128 },
        maxSequences: 4,
        kvBudgetTokens: 150,
        maxStepTokens: 64,
        observer: { finished: (f) => void preempted.push(f.preemptions) },
      })
      const sinks = reqs.map(() => sink())
      reqs.forEach((q, i) => e.submit({ prompt: q.prompt, params: q.params, stream: true }, Date.now() + 600_000, sinks[i]!))
      let maxKv = 0
      while (await e.step()) maxKv = Math.max(maxKv, e.metrics().kvTokens)
      await e.close()
      expect(e.metrics().preemptions).toBeGreaterThan(0)
      expect(preempted.filter((n) => n > 0).length, 'sequences preempted at least once').toBeGreaterThan(0)
      expect(maxKv).toBeLessThanOrEqual(150)
      reqs.forEach((_q, i) => {
        expect(sinks[i]!.got.error).toBeUndefined()
        expect(sinks[i]!.got.result?.tokens, `request ${i}`).toEqual(alone[i]!.tokens)
        // a preempted stream does not resend what it already sent
        expect(sinks[i]!.got.deltas.flatMap((d) => d.tokens)).toEqual(alone[i]!.tokens)
      })
    },
    60_000,
  )
})
