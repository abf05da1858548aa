import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildDecoder, GPT2_VOCAB_DECODER, TINY_DECODER } from '@cohort/onnx-builder'
import type { GenerateResult, GenerationSink, TokenDelta, WireError } from '@cohort/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { gpt2Tokenizer } from './tokenizers.ts'
import { createOnnxGenerator, type OnnxGenerator } from './onnx-generator.ts'
import { ifStarted } from '@cohort/test-support'

let dir: string
let tiny: string
let gen: OnnxGenerator

interface Got {
  deltas: TokenDelta[]
  result?: GenerateResult
  error?: WireError
  ended: Promise<void>
  firstDelta: Promise<void>
}
function sink(): GenerationSink & { got: Got } {
  let end!: () => void
  let first!: () => void
  const got: Got = { deltas: [], ended: new Promise((r) => (end = r)), firstDelta: new Promise((r) => (first = r)) }
  return {
    got,
    delta: (d) => {
      got.deltas.push(d)
      first()
    },
    done: (r) => {
      got.result = r
      end()
    },
    error: (e) => {
      got.error = e
      end()
    },
  }
}
const FAR = (): number => Date.now() + 120_000

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cohort-gen-'))
  tiny = join(dir, 'tiny.onnx')
  writeFileSync(tiny, buildDecoder(TINY_DECODER))
  gen = await createOnnxGenerator(tiny, { maxSequences: 2, intraOpNumThreads: 1 })
}, 120_000)
afterAll(async () => {
  await ifStarted(gen)?.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('createOnnxGenerator (worker thread, real ORT)', () => {
  it('detects the model and streams greedy output equal to each prompt decoded alone', async () => {
    expect(gen.info).toMatchObject({ maxContext: 1024, vocabSize: 257 })
    expect(gen.spec).toMatchObject({ layers: 2, kvHeads: 2, headDim: 16, eosId: 256, layout: 'gqa-shared' })
    const prompts = ['Hello', 'The quick brown fox jumps', 'a', 'Cohort serves models over HTTP']
    const alone: GenerateResult[] = []
    for (const p of prompts) {
      const s = sink()
      gen.submit({ prompt: p, params: { maxTokens: 12, temperature: 0, ignoreEos: true }, stream: false }, FAR(), s)
      await s.got.ended
      alone.push(s.got.result as GenerateResult)
    }
    const sinks = prompts.map(() => sink())
    prompts.forEach((p, i) => gen.submit({ prompt: p, params: { maxTokens: 12, temperature: 0, ignoreEos: true }, stream: true }, FAR(), sinks[i]!))
    await Promise.all(sinks.map((s) => s.got.ended))
    sinks.forEach((s, i) => {
      expect(s.got.result?.tokens).toEqual(alone[i]!.tokens)
      expect(s.got.deltas.flatMap((d) => d.tokens)).toEqual(alone[i]!.tokens)
      expect(s.got.result?.usage).toEqual({ promptTokens: new TextEncoder().encode(prompts[i]).length, completionTokens: 12 })
    })
  }, 60_000)

  it('a cancelled stream frees its slot: the queued request runs while the other long one still does', async () => {
    const long = { maxTokens: 900, temperature: 0, ignoreEos: true }
    const a = sink()
    const b = sink()
    const c = sink()
    const ha = gen.submit({ prompt: 'first', params: long, stream: true }, FAR(), a)
    const hb = gen.submit({ prompt: 'second', params: long, stream: true }, FAR(), b)
    await Promise.all([a.got.firstDelta, b.got.firstDelta])
    gen.submit({ prompt: 'third', params: { maxTokens: 3, temperature: 0 }, stream: false }, FAR(), c)
    ha.cancel()
    await a.got.ended
    expect(a.got.result?.finishReason).toBe('cancelled')
    await c.got.ended
    expect(c.got.result?.finishReason).toMatch(/stop|length/)
    expect(b.got.result).toBeUndefined() // b still holds the other slot
    hb.cancel()
    await b.got.ended
    expect(b.got.result?.finishReason).toBe('cancelled')
  }, 60_000)

  it('a request that can never run throws INVALID_INPUT at submit; a passed deadline ends with DEADLINE_EXCEEDED', async () => {
    expect(() => gen.submit({ prompt: 'x', params: { maxTokens: 5000 }, stream: false }, FAR(), sink())).toThrow(/context of 1024 tokens/)
    const s = sink()
    gen.submit({ prompt: 'late', params: { maxTokens: 5 }, stream: false }, Date.now() - 1, s)
    await s.got.ended
    expect(s.got.error?.code).toBe('DEADLINE_EXCEEDED')
  })

  it('refuses a concat-layout export with a clear error', async () => {
    const p = join(dir, 'concat.onnx')
    writeFileSync(p, buildDecoder({ ...TINY_DECODER, kvHeads: TINY_DECODER.heads, attention: 'concat' }))
    await expect(createOnnxGenerator(p, { intraOpNumThreads: 1 })).rejects.toThrow(/GroupQueryAttention/)
  }, 60_000)

  it('the GPT-2-vocabulary decoder picks gpt-tokenizer: text in, text out; close ends running streams retryably', async () => {
    const p = join(dir, 'gpt2.onnx')
    writeFileSync(p, buildDecoder(GPT2_VOCAB_DECODER))
    const g = await createOnnxGenerator(p, { intraOpNumThreads: 1 })
    expect(g.info.vocabSize).toBe(50257)
    const s = sink()
    g.submit({ prompt: 'Hello world', params: { maxTokens: 8, temperature: 0, ignoreEos: true }, stream: true }, FAR(), s)
    await s.got.ended
    expect(s.got.result?.usage.promptTokens).toBe(gpt2Tokenizer.encode('Hello world').length)
    expect(s.got.result?.text).toBe(gpt2Tokenizer.decode(s.got.result?.tokens ?? []))
    const r = sink()
    g.submit({ prompt: 'Hi', params: { maxTokens: 1000, temperature: 0, ignoreEos: true }, stream: true }, FAR(), r)
    await r.got.firstDelta
    await g.close()
    await g.close()
    await r.got.ended
    expect(r.got.error).toMatchObject({ code: 'WORKER_LOST', retryAfterS: 1 })
  }, 120_000)
})
