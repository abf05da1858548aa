// The generative APIs (docs/generative.md) against a live stack: Triton generate/generate_stream and
// OpenAI completions/chat completions, streamed and not, over real HTTP, with the char-level fixture
// generator (test/fixtures/char-generator.ts) whose CHARGEN_STATE files count running sequences.
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { parsePrometheus } from '@cohort/metrics'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ifStarted } from '@cohort/test-support'

export const CHAR_GENERATOR = new URL('../fixtures/char-generator.ts', import.meta.url).pathname

/** A running stack: its gateway URL and the folder of the generators' state files. */
export interface GenStack {
  baseUrl: string
  stateDir: string
  /** `/metrics` of every process that runs the generator (summed): the embedded server, or each worker's `--metrics-port`. */
  metricsUrls: string[]
  close(): Promise<void>
}

export interface GenState {
  /** The state file. */
  file: string
  pid: number
  running: number
  /** Of `running`, those waiting for a slot (CHARGEN_MAX_SEQS). */
  waiting: number
  submitted: number
  cancelled: number
  /** Steps the generator has run. */
  steps: number
  /** Its step gate (CHARGEN_GATE) holds the next step. */
  held: boolean
}

/** The state of every generator process (one file each). */
export function states(dir: string): GenState[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => ({ ...(JSON.parse(readFileSync(join(dir, f), 'utf8')) as GenState), file: join(dir, f) }))
}

export const running = (dir: string) => states(dir).reduce((n, s) => n + s.running, 0)

/** The `cohort_generate_*` series of every URL, summed by series name (`name{labels}`). */
export async function generateMetrics(urls: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  for (const u of urls) {
    const text = await (await fetch(u)).text()
    for (const [k, v] of parsePrometheus(text)) {
      if (k.startsWith('cohort_generate_')) out.set(k, (out.get(k) ?? 0) + v)
    }
  }
  return out
}

/** Poll `cond` every 50 ms until it holds (the test's own timeout bounds the wait). */
export async function until(cond: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const t0 = Date.now()
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) {
      throw new Error(`timed out waiting for ${what}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

export async function post(baseUrl: string, path: string, body: unknown, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), ...(signal ? { signal } : {}) })
}

/** The `data:` payloads of an SSE body, in order (`[DONE]` kept as the string). */
export async function sseData(r: Response): Promise<unknown[]> {
  const text = await r.text()
  return text
    .split('\n\n')
    .filter((b) => b.trim() !== '')
    .map((b) => {
      const line = b.split('\n').find((l) => l.startsWith('data: '))
      if (!line) throw new Error(`not an SSE data event: ${JSON.stringify(b)}`)
      const d = line.slice(6)
      return d === '[DONE]' ? d : JSON.parse(d)
    })
}

type Chunk = { choices: { text?: string; delta?: { role?: string; content?: string }; finish_reason: string | null }[]; usage?: unknown }

export function defineGenerativeSuite(name: string, start: () => Promise<GenStack>): void {
  describe(name, () => {
    let s: GenStack
    beforeAll(async () => {
      s = await start()
    }, 120_000)
    afterAll(async () => {
      await ifStarted(s)?.close()
    })

    const prompt = 'the quick brown fox'

    it("Triton generate and generate_stream: the stream's deltas add up to the non-streamed text", async () => {
      const body = { text_input: prompt, parameters: { max_tokens: 40, temperature: 0, ignore_eos: true } }
      const r = await post(s.baseUrl, '/v2/models/chars/generate', body)
      expect(r.status).toBe(200)
      const one = (await r.json()) as { model_name: string; model_version: string; text_output: string; finish_reason: string }
      expect(one).toMatchObject({ model_name: 'chars', model_version: '1', finish_reason: 'length' })
      expect(one.text_output).toHaveLength(40)
      const st = await post(s.baseUrl, '/v2/models/chars/generate_stream', body)
      expect(st.status).toBe(200)
      expect(st.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      const events = (await sseData(st)) as { text_output: string; finish_reason?: string }[]
      expect(events.length).toBeGreaterThan(2)
      expect(events.map((e) => e.text_output).join('')).toBe(one.text_output)
      expect(events.at(-1)?.finish_reason).toBe('length')
    })

    it('OpenAI /v1/completions: streamed chunks add up to the non-streamed text; usage and finish_reason', async () => {
      const body = { model: 'chars', prompt, max_tokens: 30, temperature: 1, seed: 42, ignore_eos: true }
      const r = await post(s.baseUrl, '/v1/completions', body)
      expect(r.status).toBe(200)
      const one = (await r.json()) as { object: string; choices: { text: string; finish_reason: string }[]; usage: Record<string, number> }
      expect(one.object).toBe('text_completion')
      expect(one.choices[0]?.finish_reason).toBe('length')
      expect(one.usage).toEqual({ prompt_tokens: prompt.length, completion_tokens: 30, total_tokens: prompt.length + 30 })
      const st = await post(s.baseUrl, '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } })
      expect(st.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      const data = await sseData(st)
      expect(data.at(-1)).toBe('[DONE]')
      const chunks = data.slice(0, -1) as Chunk[]
      const usage = chunks.at(-1)!
      expect(usage.choices).toEqual([])
      expect(usage.usage).toEqual(one.usage)
      const text = chunks.slice(0, -1)
      expect(text.every((c) => c.usage === null)).toBe(true)
      expect(text.map((c) => c.choices[0]?.text ?? '').join('')).toBe(one.choices[0]?.text)
      expect(text.at(-1)?.choices[0]?.finish_reason).toBe('length')
    })

    it('OpenAI /v1/chat/completions: role first, content deltas add up to the message, a stop string ends it', async () => {
      const body = {
        model: 'chars',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: prompt },
        ],
        max_tokens: 200,
        temperature: 0,
        stop: ['e'],
        ignore_eos: true,
      }
      const r = await post(s.baseUrl, '/v1/chat/completions', body)
      expect(r.status).toBe(200)
      const one = (await r.json()) as { object: string; choices: { message: { role: string; content: string }; finish_reason: string }[]; usage: { prompt_tokens: number } }
      expect(one.object).toBe('chat.completion')
      expect(one.choices[0]?.message.role).toBe('assistant')
      // The template (docs/generative.md#chat-template) is what the model saw.
      expect(one.usage.prompt_tokens).toBe(`system: be brief\nuser: ${prompt}\nassistant:`.length)
      const content = one.choices[0]!.message.content
      expect(content).not.toContain('e')
      const st = await post(s.baseUrl, '/v1/chat/completions', { ...body, stream: true })
      const data = await sseData(st)
      expect(data.at(-1)).toBe('[DONE]')
      const chunks = data.slice(0, -1) as (Chunk & { object: string })[]
      expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.usage === undefined)).toBe(true)
      expect(chunks[0]?.choices[0]?.delta?.role).toBe('assistant')
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(content)
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe(one.choices[0]?.finish_reason)
    })

    it('a client that disconnects mid-stream frees its sequence slot (counted by the generator)', async () => {
      await until(() => running(s.stateDir) === 0, 'no sequence running before the test')
      const before = states(s.stateDir).reduce((n, x) => n + x.cancelled, 0)
      const ac = new AbortController()
      const r = await post(s.baseUrl, '/v1/completions', { model: 'chars', prompt, max_tokens: 8000, ignore_eos: true, stream: true }, ac.signal)
      expect(r.status).toBe(200)
      const reader = r.body!.getReader()
      await reader.read() // the stream has begun: the sequence holds a slot
      await until(() => running(s.stateDir) === 1, 'the sequence to run')
      ac.abort()
      await reader.cancel().catch(() => undefined)
      await until(() => running(s.stateDir) === 0, 'the aborted sequence to leave the generator')
      expect(states(s.stateDir).reduce((n, x) => n + x.cancelled, 0)).toBe(before + 1)
    })

    it('counts N generations and the tokens their replies returned in cohort_generate_* (docs/metrics.md#generative-models)', async () => {
      await until(() => running(s.stateDir) === 0, 'no sequence running before the test')
      const before = await generateMetrics(s.metricsUrls)
      const N = 5
      const usage = await Promise.all(
        Array.from({ length: N }, async (_, i) => {
          const body = { model: 'chars', prompt: `count ${i}`, max_tokens: 6 + i, temperature: 0, ignore_eos: true, stream: i % 2 === 0 }
          const r = await post(s.baseUrl, '/v1/completions', i % 2 === 0 ? { ...body, stream_options: { include_usage: true } } : body)
          expect(r.status).toBe(200)
          if (i % 2 === 0) {
            const data = await sseData(r)
            return (data.at(-2) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage
          }
          return ((await r.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage
        }),
      )
      const after = await generateMetrics(s.metricsUrls)
      const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0)
      expect(d('cohort_generate_finished_total{model="chars",reason="length"}')).toBe(N)
      expect(d('cohort_generate_tokens_total{model="chars"}')).toBe(usage.reduce((n, u) => n + u.completion_tokens, 0))
      expect(d('cohort_generate_tokens_total{model="chars"}')).toBe(6 + 7 + 8 + 9 + 10)
      expect(d('cohort_generate_prompt_tokens_total{model="chars"}')).toBe(usage.reduce((n, u) => n + u.prompt_tokens, 0))
      // The fixture streams deltas to the worker for every request: each has a TTFT and a TPOT.
      expect(d('cohort_generate_time_to_first_token_seconds_count{model="chars"}')).toBe(N)
      expect(d('cohort_generate_time_per_output_token_seconds_count{model="chars"}')).toBe(N)
      expect(d('cohort_generate_time_to_first_token_seconds_sum{model="chars"}')).toBeGreaterThan(0)
    })

    it('OpenAI logprobs travel with the stream: chat chunks carry each token, its logprob, bytes and top alternatives', async () => {
      const body = { model: 'chars', messages: [{ role: 'user', content: prompt }], max_tokens: 12, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 2 }
      const one = (await (await post(s.baseUrl, '/v1/chat/completions', body)).json()) as {
        choices: { message: { content: string }; logprobs: { content: { token: string; logprob: number; bytes: number[]; top_logprobs: unknown[] }[] } }[]
      }
      const content = one.choices[0]!.logprobs.content
      expect(content).toHaveLength(12)
      expect(content.map((c) => c.token).join('')).toBe(one.choices[0]!.message.content)
      expect(content.every((c) => c.bytes.length <= 1 && c.top_logprobs.length === 2 && c.logprob === Math.log(1 / 3))).toBe(true)
      const data = await sseData(await post(s.baseUrl, '/v1/chat/completions', { ...body, stream: true }))
      const streamed = (data.slice(0, -1) as { choices: { logprobs: { content: unknown[] } | null }[] }[]).flatMap((c) => c.choices[0]?.logprobs?.content ?? [])
      expect(streamed).toEqual(content)
    })

    it('logprobs off by their neutral values: completions logprobs false or null, chat top_logprobs 0 alone; logprobs null', async () => {
      for (const [path, body] of [
        ['/v1/completions', { model: 'chars', prompt, max_tokens: 3, logprobs: false }],
        ['/v1/completions', { model: 'chars', prompt, max_tokens: 3, logprobs: null }],
        ['/v1/chat/completions', { model: 'chars', messages: [{ role: 'user', content: prompt }], max_tokens: 3, top_logprobs: 0 }],
        ['/v1/chat/completions', { model: 'chars', messages: [{ role: 'user', content: prompt }], max_tokens: 3, logprobs: false }],
      ] as const) {
        const r = await post(s.baseUrl, path, body)
        expect(r.status, JSON.stringify(body)).toBe(200)
        expect(((await r.json()) as { choices: { logprobs: unknown }[] }).choices[0]?.logprobs).toBeNull()
      }
    })

    it('GET /v1/models lists the generative models only', async () => {
      const r = await fetch(`${s.baseUrl}/v1/models`)
      const b = (await r.json()) as { object: string; data: { id: string; object: string }[] }
      expect(b.object).toBe('list')
      expect(b.data.map((m) => m.id)).toEqual(['chars'])
    })

    it.each([
      ['/v1/completions', { model: 'nope', prompt: 'x' }, 404, 'model'],
      ['/v1/completions', { model: 'demo', prompt: 'x' }, 400, 'model'],
      ['/v1/chat/completions', { model: 'demo', messages: [{ role: 'user', content: 'x' }] }, 400, 'model'],
      ['/v1/completions', { model: 'chars', prompt: 'x', max_tokens: 0 }, 400, 'max_tokens'],
      ['/v1/completions', { model: 'chars', prompt: 'x', temperature: 9, stream: true }, 400, 'temperature'],
      ['/v1/completions', { model: 'chars', prompt: 'x', n: 3 }, 400, 'n'],
      ['/v1/chat/completions', { model: 'chars', messages: [{ role: 'robot', content: 'x' }] }, 400, 'messages'],
      ['/v1/completions', { model: 'chars', prompt: 'x', logprobs: 9 }, 400, 'logprobs'],
      ['/v1/chat/completions', { model: 'chars', messages: [{ role: 'user', content: 'x' }], logprobs: true, top_logprobs: 9 }, 400, 'top_logprobs'],
      ['/v1/chat/completions', { model: 'chars', messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 }, 400, 'top_logprobs'],
    ])('%s %j -> %i naming %s (OpenAI error body)', async (path, body, status, param) => {
      const r = await post(s.baseUrl, path, body)
      expect(r.status).toBe(status)
      const e = (await r.json()) as { error: { message: string; param: string | null; code: string } }
      expect(e.error.param).toBe(param)
      expect(e.error.message).toContain(param === 'messages' ? 'messages[0].role' : param)
    })

    it.each([
      ['/v2/models/nope/generate', { text_input: 'x' }, 404, /model "nope"/],
      ['/v2/models/demo/generate_stream', { text_input: 'x' }, 400, /model "demo" is not generative/],
      ['/v2/models/chars/generate_stream', { text_input: 'x', parameters: { max_tokens: 'many' } }, 400, /parameters\.max_tokens must be an integer/],
      ['/v2/models/chars/generate', { text_input: 'x', parameters: { top_p: 2 } }, 400, /parameters\.top_p must be a number in \(0, 1\]/],
      ['/v2/models/chars/generate', { prompt: 'x' }, 400, /text_input must be a string/],
    ])('Triton %s %j -> %i with the field named', async (path, body, status, msg) => {
      const r = await post(s.baseUrl, path, body)
      expect(r.status).toBe(status)
      expect(((await r.json()) as { error: string }).error).toMatch(msg)
    })
  })
}
