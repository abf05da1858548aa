// An ONNX decoder served end to end: `cohort serve --generative tiny=<decoder>.onnx` runs the
// builder's seeded test decoder (GroupQueryAttention KV cache) under the continuous-batching engine,
// behind the OpenAI-compatible routes. The reference for every greedy output is independent of the
// engine: a naive decode (generative-naive.ts) that reruns the whole sequence through
// onnxruntime-node at every step, batch 1, no KV cache kept. The fixture prompts' continuations all
// differ, so an engine that gave one sequence another's row would fail.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { byteTokenizer, Engine, type StepInfo } from '@cohort/generative'
import { buildDecoder, TINY_DECODER } from '@cohort/onnx-builder'
import type { GenerateResult } from '@cohort/protocol'
import { createOnnxGenerator, ortDecoderSession } from '@cohort/worker/generative'
import { parsePrometheus } from '@cohort/metrics'
import { postJson, spawnCohort, type CliProcess, ifStarted } from '@cohort/test-support'
import type * as ort from 'onnxruntime-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { naiveGreedy, naiveSession, type NaiveResult } from './generative-naive.ts'

const PROMPTS = ['hello there', 'a', 'the quick brown fox jumps', 'batching!']
const MAX_TOKENS = 12
const PATIENT = { 'x-cohort-timeout-ms': '60000' }
const SPEC = {
  layers: TINY_DECODER.layers,
  kvHeads: TINY_DECODER.kvHeads,
  headDim: TINY_DECODER.hidden / TINY_DECODER.heads,
  vocabSize: TINY_DECODER.vocabSize,
  maxContext: TINY_DECODER.maxContext,
  eosId: TINY_DECODER.eosId,
  layout: 'gqa-shared' as const,
}

/** usage.completion_tokens of a greedy run: the tokens, and the EOS that ended it (sampled, not returned). */
const sampled = (n: NaiveResult) => n.tokens.length + (n.finishReason === 'stop' ? 1 : 0)

describe('an ONNX decoder behind the OpenAI-compatible API (cohort serve --generative x.onnx)', () => {
  let dir: string
  let serve: CliProcess
  let base: string
  let model: Uint8Array
  let reference: ort.InferenceSession
  /** Each prompt's greedy continuation by the naive decode. */
  const naive = new Map<string, NaiveResult>()
  /** With logprobs (2 alternatives), from the engine: PROMPTS[0] as a completion, and as a chat turn (the default template). */
  const withLogprobs = new Map<'completion' | 'chat', GenerateResult>()

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cohort-gen-onnx-'))
    const file = join(dir, 'tiny.onnx')
    model = buildDecoder(TINY_DECODER)
    writeFileSync(file, model)
    reference = await naiveSession(model)
    for (const p of PROMPTS) naive.set(p, await naiveGreedy(reference, TINY_DECODER, p, MAX_TOKENS))
    naive.set('chat', await naiveGreedy(reference, TINY_DECODER, `user: ${PROMPTS[0]!}\nassistant:`, MAX_TOKENS))
    // The alternatives' order and bytes come from the engine (the naive decode checks the chosen tokens and their logprobs).
    const gen = await createOnnxGenerator(file, { intraOpNumThreads: 1 })
    try {
      for (const [k, prompt] of [
        ['completion', PROMPTS[0]!],
        ['chat', `user: ${PROMPTS[0]!}\nassistant:`],
      ] as const) {
        withLogprobs.set(
          k,
          await new Promise<GenerateResult>((resolve, reject) => {
            gen.submit({ prompt, params: { maxTokens: MAX_TOKENS, temperature: 0, logprobs: 2 }, stream: false }, Date.now() + 60_000, {
              delta: () => undefined,
              done: resolve,
              error: (e) => reject(new Error(`${e.code}: ${e.message}`)),
            })
          }),
        )
      }
    } finally {
      await gen.close()
    }
    serve = spawnCohort(['serve', '--port', '0', '--threads', '1', '--generative', `tiny=${file}`])
    const [, port] = await serve.waitFor(/on http:\/\/127\.0\.0\.1:(\d+)/, 90_000)
    base = `http://127.0.0.1:${port}`
  }, 120_000)

  afterAll(async () => {
    await ifStarted(serve)?.stop('SIGKILL')
    await ifStarted(reference)?.release()
    rmSync(dir, { recursive: true, force: true })
  })

  const complete = (prompt: string) => postJson(`${base}/v1/completions`, { model: 'tiny', prompt, max_tokens: MAX_TOKENS, temperature: 0 }, PATIENT)

  it('lists the decoder as a model', async () => {
    const r = await fetch(`${base}/v1/models`)
    expect(r.status).toBe(200)
    const body = (await r.json()) as { data: { id: string }[] }
    expect(body.data.map((m) => m.id)).toContain('tiny')
  })

  it('answers a greedy completion with exactly the tokens of the naive decode', async () => {
    const r = await complete(PROMPTS[0]!)
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    const want = naive.get(PROMPTS[0]!)!
    expect(r.body.choices[0].text).toBe(want.text)
    expect(r.body.usage.completion_tokens).toBe(sampled(want))
    expect(r.body.choices[0].finish_reason).toBe(want.finishReason)
  })

  it('the fixture prompts have pairwise different greedy continuations (so a swapped or shared row shows)', () => {
    const texts = PROMPTS.map((p) => naive.get(p)!.tokens.join(','))
    expect(new Set(texts).size).toBe(PROMPTS.length)
    // They differ from the first token on: any row mix-up changes an output.
    expect(new Set(PROMPTS.map((p) => naive.get(p)!.tokens[0])).size).toBe(PROMPTS.length)
  })

  it('gives concurrent HTTP prompts each its own greedy output: the naive decode of that prompt, all different', async () => {
    const rs = await Promise.all(PROMPTS.map((p) => complete(p)))
    rs.forEach((r, i) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(r.body.choices[0].text, PROMPTS[i]).toBe(naive.get(PROMPTS[i]!)!.text)
    })
    expect(new Set(rs.map((r) => r.body.choices[0].text as string)).size).toBe(PROMPTS.length)
  })

  it('batches concurrent prompts per step (the engine on this model, stepped by hand): one decode run over every sequence, each output its naive decode', async () => {
    // The served engine (Engine + ortDecoderSession, as the generation thread runs them), stepped
    // by the test: every prompt is submitted before the first step, so none can miss the batch.
    const steps: StepInfo[] = []
    const e = new Engine({ session: ortDecoderSession(reference), model: SPEC, tokenizer: byteTokenizer, observer: { step: (x) => void steps.push(x) } })
    const got = new Map<string, GenerateResult>()
    const errors: string[] = []
    for (const p of PROMPTS) {
      e.submit({ prompt: p, params: { maxTokens: MAX_TOKENS, temperature: 0 }, stream: false }, Date.now() + 60_000, {
        delta: () => undefined,
        done: (r) => void got.set(p, r),
        error: (x) => void errors.push(`${p}: ${x.code} ${x.message}`),
      })
    }
    for (let i = 0; i < 100 && (await e.step()); i++) {
      // until every sequence has ended
    }
    await e.close()
    expect(errors).toEqual([])
    // Step 1 prefills every prompt (one run each, its first token); each later step decodes all of
    // them in ONE run (batch PROMPTS.length) until they end together at MAX_TOKENS.
    expect(PROMPTS.every((p) => naive.get(p)!.finishReason === 'length')).toBe(true)
    expect(steps.map((x) => x.decodeRows)).toEqual([0, ...Array<number>(MAX_TOKENS - 1).fill(PROMPTS.length)])
    expect(e.metrics().sessionRuns).toBe(PROMPTS.length + (MAX_TOKENS - 1))
    for (const p of PROMPTS) expect(got.get(p)?.tokens, p).toEqual(naive.get(p)!.tokens)
  })

  it('streams deltas that add up to the same text', async () => {
    const r = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...PATIENT },
      body: JSON.stringify({ model: 'tiny', prompt: PROMPTS[2], max_tokens: MAX_TOKENS, temperature: 0, stream: true }),
    })
    expect(r.status).toBe(200)
    const events = (await r.text())
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
    expect(events.at(-1)).toBe('[DONE]')
    const text = events
      .slice(0, -1)
      .map((e) => JSON.parse(e) as { choices: { text?: string }[] })
      .map((c) => c.choices[0]?.text ?? '')
      .join('')
    expect(text).toBe(naive.get(PROMPTS[2]!)!.text)
  })

  it("exports the engine's metrics on /metrics: N generations, their tokens, TTFT and TPOT, gauges back at rest", async () => {
    const scrape = async () => parsePrometheus(await (await fetch(`${base}/metrics`)).text())
    const before = await scrape()
    const d = (after: Map<string, number>, k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0)
    const rs = await Promise.all(PROMPTS.map((p) => complete(p)))
    for (const r of rs) expect(r.status, JSON.stringify(r.body)).toBe(200)
    const m = await scrape()
    const tokens = rs.reduce((n, r) => n + (r.body.usage.completion_tokens as number), 0)
    const finished = (reason: string) => d(m, `cohort_generate_finished_total{model="tiny",reason="${reason}"}`)
    expect(finished('length') + finished('stop')).toBe(PROMPTS.length)
    expect(finished('length')).toBe(rs.filter((r) => r.body.choices[0].finish_reason === 'length').length)
    expect(d(m, 'cohort_generate_tokens_total{model="tiny"}')).toBe(tokens)
    expect(d(m, 'cohort_generate_prompt_tokens_total{model="tiny"}')).toBe(rs.reduce((n, r) => n + (r.body.usage.prompt_tokens as number), 0))
    expect(d(m, 'cohort_generate_time_to_first_token_seconds_count{model="tiny"}')).toBe(PROMPTS.length)
    expect(d(m, 'cohort_generate_time_to_first_token_seconds_sum{model="tiny"}')).toBeGreaterThan(0)
    expect(d(m, 'cohort_generate_time_per_output_token_seconds_count{model="tiny"}')).toBe(rs.filter((r) => r.body.usage.completion_tokens > 1).length)
    // Every generation has ended: nothing runs or waits, no KV held; the budget is the engine's default.
    expect(m.get('cohort_generate_running_sequences{model="tiny"}')).toBe(0)
    expect(m.get('cohort_generate_waiting_sequences{model="tiny"}')).toBe(0)
    expect(m.get('cohort_generate_kv_cache_tokens{model="tiny"}')).toBe(0)
    expect(m.get('cohort_generate_kv_cache_usage_ratio{model="tiny"}')).toBe(0)
    expect(m.get('cohort_generate_kv_cache_budget_tokens{model="tiny"}')).toBe(16 * 1024)
    expect(m.get('cohort_generate_preemptions_total{model="tiny"}')).toBe(0)
  })

  it("returns OpenAI logprobs on /v1/completions, streamed and not, with the engine's values", async () => {
    const want = withLogprobs.get('completion')!.logprobs!
    expect(want).toHaveLength(withLogprobs.get('completion')!.tokens.length)
    // The engine's values are the naive decode's: its tokens and their log-probabilities.
    const ref = naive.get(PROMPTS[0]!)!
    expect(want.map((l) => l.token)).toEqual(ref.tokens)
    want.forEach((l, i) => expect(l.logprob).toBeCloseTo(ref.logprobs[i]!, 4))
    const body = { model: 'tiny', prompt: PROMPTS[0], max_tokens: MAX_TOKENS, temperature: 0, logprobs: 2 }
    const r = await postJson(`${base}/v1/completions`, body, PATIENT)
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    type Lp = { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] }
    const lp = r.body.choices[0].logprobs as Lp
    expect(lp.tokens).toEqual(want.map((l) => l.text))
    want.forEach((l, i) => {
      expect(lp.token_logprobs[i]).toBeCloseTo(l.logprob, 5)
      // Alternatives by text; tokens of one text (parts of characters: U+FFFD) share the best one's entry.
      const first = [...l.top!, l].filter((t, j, all) => all.findIndex((u) => u.text === t.text) === j)
      expect(Object.keys(lp.top_logprobs[i]!).sort()).toEqual(first.map((t) => t.text).sort())
      for (const t of first) expect(lp.top_logprobs[i]![t.text!], `top ${t.token} at ${i}`).toBeCloseTo(t.logprob, 5)
    })
    expect(lp.text_offset[0]).toBe(0)
    expect(lp.text_offset.slice(1)).toEqual(lp.tokens.slice(0, -1).map((_, i) => lp.tokens.slice(0, i + 1).reduce((n, t) => n + Array.from(t).length, 0)))
    const st = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...PATIENT },
      body: JSON.stringify({ ...body, stream: true }),
    })
    const chunks = (await st.text())
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { choices: { logprobs: Lp | null }[] })
    const parts = chunks.map((c) => c.choices[0]?.logprobs).filter((x): x is Lp => x !== null && x !== undefined)
    expect(parts.length).toBeGreaterThan(1)
    expect(parts.flatMap((p) => p.tokens)).toEqual(lp.tokens)
    expect(parts.flatMap((p) => p.text_offset)).toEqual(lp.text_offset)
    parts.flatMap((p) => p.token_logprobs).forEach((x, i) => expect(x).toBeCloseTo(lp.token_logprobs[i]!, 5))
  })

  it("returns OpenAI logprobs on /v1/chat/completions: each token's logprob, bytes and top alternatives from the engine", async () => {
    const ref = withLogprobs.get('chat')!
    const independent = naive.get('chat')!
    expect(ref.tokens).toEqual(independent.tokens)
    ref.logprobs!.forEach((l, i) => expect(l.logprob).toBeCloseTo(independent.logprobs[i]!, 4))
    const r = await postJson(
      `${base}/v1/chat/completions`,
      { model: 'tiny', messages: [{ role: 'user', content: PROMPTS[0] }], max_tokens: MAX_TOKENS, temperature: 0, logprobs: true, top_logprobs: 2 },
      PATIENT,
    )
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    type Entry = { token: string; logprob: number; bytes: number[] }
    const content = r.body.choices[0].logprobs.content as (Entry & { top_logprobs: Entry[] })[]
    expect(r.body.choices[0].message.content).toBe(ref.text)
    expect(content.map((c) => c.bytes)).toEqual(ref.logprobs!.map((l) => l.bytes))
    // The bytes of the tokens are the message, whatever characters span tokens.
    expect(new TextDecoder().decode(Uint8Array.from(content.flatMap((c) => c.bytes)))).toBe(ref.text)
    ref.logprobs!.forEach((l, i) => {
      expect(content[i]!.token).toBe(l.text)
      expect(content[i]!.logprob).toBeCloseTo(l.logprob, 5)
      expect(content[i]!.top_logprobs.map((t) => t.bytes)).toEqual(l.top!.map((t) => t.bytes))
      content[i]!.top_logprobs.forEach((t, j) => expect(t.logprob).toBeCloseTo(l.top![j]!.logprob, 5))
    })
  })

  it('refuses a prompt past the model context with a 400 naming the limit', async () => {
    const r = await postJson(`${base}/v1/completions`, { model: 'tiny', prompt: 'x'.repeat(1100), max_tokens: 4 }, PATIENT)
    expect(r.status).toBe(400)
    expect(JSON.stringify(r.body)).toMatch(/context|1024/)
  })
})
