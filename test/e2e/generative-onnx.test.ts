// An ONNX decoder served end to end: `cohort serve --generative tiny=<decoder>.onnx` runs the
// builder's seeded test decoder (GroupQueryAttention KV cache) under the continuous-batching engine,
// behind the OpenAI-compatible routes. Greedy outputs over HTTP, alone or concurrent, must equal the
// same prompts decoded alone by the engine in this process.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildDecoder, TINY_DECODER } from '@cohort/onnx-builder'
import type { GenerateResult } from '@cohort/protocol'
import { createOnnxGenerator } from '@cohort/worker/generative'
import { parsePrometheus } from '@cohort/metrics'
import { postJson, spawnCohort, type CliProcess } from '@cohort/test-support'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const PROMPTS = ['hello there', 'a', 'the quick brown fox jumps', 'batching!']
const MAX_TOKENS = 12
const PATIENT = { 'x-cohort-timeout-ms': '60000' }

describe('an ONNX decoder behind the OpenAI-compatible API (cohort serve --generative x.onnx)', () => {
  let dir: string
  let serve: CliProcess
  let base: string
  const alone = new Map<string, GenerateResult>()
  /** With logprobs (2 alternatives): PROMPTS[0] as a completion, and as a chat turn (the default template). */
  const withLogprobs = new Map<'completion' | 'chat', GenerateResult>()

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cohort-gen-onnx-'))
    const file = join(dir, 'tiny.onnx')
    writeFileSync(file, buildDecoder(TINY_DECODER))
    // The reference: each prompt decoded alone, greedy, by the engine in this process.
    const gen = await createOnnxGenerator(file, { intraOpNumThreads: 1 })
    try {
      for (const p of PROMPTS) {
        alone.set(
          p,
          await new Promise<GenerateResult>((resolve, reject) => {
            gen.submit({ prompt: p, params: { maxTokens: MAX_TOKENS, temperature: 0 }, stream: false }, Date.now() + 60_000, {
              delta: () => undefined,
              done: resolve,
              error: (e) => reject(new Error(`${e.code}: ${e.message}`)),
            })
          }),
        )
      }
      for (const [k, prompt] of [['completion', PROMPTS[0]!], ['chat', `user: ${PROMPTS[0]!}\nassistant:`]] as const) {
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
    await serve?.stop('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  const complete = (prompt: string) =>
    postJson(`${base}/v1/completions`, { model: 'tiny', prompt, max_tokens: MAX_TOKENS, temperature: 0 }, PATIENT)

  it('lists the decoder as a model', async () => {
    const r = await fetch(`${base}/v1/models`)
    expect(r.status).toBe(200)
    const body = (await r.json()) as { data: { id: string }[] }
    expect(body.data.map((m) => m.id)).toContain('tiny')
  })

  it('answers a greedy completion with exactly the tokens the engine gives that prompt alone', async () => {
    const r = await complete(PROMPTS[0]!)
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    const want = alone.get(PROMPTS[0]!)!
    expect(r.body.choices[0].text).toBe(want.text)
    expect(r.body.usage.completion_tokens).toBe(want.usage.completionTokens)
    expect(r.body.choices[0].finish_reason).toBe(want.finishReason === 'length' ? 'length' : 'stop')
  })

  it('gives concurrent prompts (batched per step) each its own greedy output', async () => {
    const rs = await Promise.all(PROMPTS.map((p) => complete(p)))
    rs.forEach((r, i) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(r.body.choices[0].text, PROMPTS[i]).toBe(alone.get(PROMPTS[i]!)!.text)
    })
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
    expect(text).toBe(alone.get(PROMPTS[2]!)!.text)
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
    expect(lp.text_offset.slice(1)).toEqual(lp.tokens.slice(0, -1).map((_, i) => lp.tokens.slice(0, i + 1).reduce((n, t) => n + [...t].length, 0)))
    const st = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...PATIENT }, body: JSON.stringify({ ...body, stream: true }) })
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
    const r = await postJson(`${base}/v1/chat/completions`, { model: 'tiny', messages: [{ role: 'user', content: PROMPTS[0] }], max_tokens: MAX_TOKENS, temperature: 0, logprobs: true, top_logprobs: 2 }, PATIENT)
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
