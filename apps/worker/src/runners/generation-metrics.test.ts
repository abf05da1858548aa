// The cohort_generate_* metrics a GenerativeRunner records (docs/metrics.md#generative-models): from
// the generator's watcher calls and gauges when it has them, else timed from its sink calls.
import { parsePrometheus, Registry } from '@cohort/metrics'
import type { GenerateInput, GenerationSink, GenerationWatcher, Generator, GeneratorGauges } from '@cohort/protocol'
import { describe, expect, it } from 'vitest'
import { GenerativeRunner } from './generative-runner.ts'

const INFO = { maxContext: 64, vocabSize: 128 }
const input = (stream: boolean): GenerateInput => ({ prompt: 'abc', params: { maxTokens: 4 }, stream })
const quiet: GenerationSink = { delta: () => undefined, done: () => undefined, error: () => undefined }

async function started(g: Generator): Promise<{ runner: GenerativeRunner; scrape: () => Map<string, number> }> {
  const registry = new Registry()
  const runner = new GenerativeRunner('gen', () => g)
  runner.instrument(registry)
  await runner.start()
  return { runner, scrape: () => parsePrometheus(registry.render()) }
}

describe('GenerativeRunner metrics', () => {
  it('a generator without watch is timed from its sink: TTFT for streamed ones, tokens and reasons for all', async () => {
    const sinks: GenerationSink[] = []
    const g: Generator = {
      info: INFO,
      submit: (_i, _d, sink) => {
        sinks.push(sink)
        return { cancel: () => undefined }
      },
      close: () => Promise.resolve(),
    }
    const { runner, scrape } = await started(g)
    const got: string[] = []
    runner.generator.submit(input(true), 1e15, { delta: (d) => got.push(d.text), done: (r) => got.push(`done:${r.text}`), error: () => undefined })
    runner.generator.submit(input(false), 1e15, quiet)
    runner.generator.submit(input(true), 1e15, quiet)
    const [streamed, plain, failing] = sinks as [GenerationSink, GenerationSink, GenerationSink]
    streamed.delta({ tokens: [1], text: 'x' })
    expect(scrape().get('cohort_generate_time_to_first_token_seconds_count{model="gen"}')).toBe(1)
    streamed.delta({ tokens: [2, 3], text: 'yz' })
    streamed.done({ text: 'xyz', tokens: [1, 2, 3], finishReason: 'length', usage: { promptTokens: 3, completionTokens: 3 } })
    plain.done({ text: 'ab', tokens: [1, 2], finishReason: 'stop', usage: { promptTokens: 3, completionTokens: 3 } })
    failing.delta({ tokens: [9], text: 'q' })
    failing.error({ code: 'DEADLINE_EXCEEDED', message: 'late' })
    expect(got).toEqual(['x', 'yz', 'done:xyz'])
    const m = scrape()
    expect(m.get('cohort_generate_time_to_first_token_seconds_count{model="gen"}')).toBe(2) // streamed and failing
    expect(m.get('cohort_generate_time_per_output_token_seconds_count{model="gen"}')).toBe(1) // streamed (3 tokens)
    expect(m.get('cohort_generate_tokens_total{model="gen"}')).toBe(3 + 3 + 1)
    expect(m.get('cohort_generate_prompt_tokens_total{model="gen"}')).toBe(6)
    expect(m.get('cohort_generate_finished_total{model="gen",reason="length"}')).toBe(1)
    expect(m.get('cohort_generate_finished_total{model="gen",reason="stop"}')).toBe(1)
    expect(m.get('cohort_generate_finished_total{model="gen",reason="error"}')).toBe(1)
    // No gauges without a gauges() hook.
    expect(m.has('cohort_generate_running_sequences{model="gen"}')).toBe(false)
    await runner.close()
  })

  it("a generator with watch and gauges reports itself: its TTFT and TPOT values, its scheduler's gauges", async () => {
    const watchers: GenerationWatcher[] = []
    const gauges: GeneratorGauges = { running: 3, waiting: 2, kvTokens: 96, kvBudgetTokens: 128, preemptions: 5 }
    const g: Generator = {
      info: INFO,
      submit: () => ({ cancel: () => undefined }),
      close: () => Promise.resolve(),
      watch: (w) => void watchers.push(w),
      gauges: () => gauges,
    }
    const { runner, scrape } = await started(g)
    expect(runner.generator).toBe(g) // not wrapped: the generator times itself
    expect(watchers).toHaveLength(1)
    watchers[0]!.firstToken?.(250)
    watchers[0]!.finished?.({ reason: 'stop', promptTokens: 10, completionTokens: 4, ttftMs: 250, tpotMs: 20 })
    let m = scrape()
    expect(m.get('cohort_generate_time_to_first_token_seconds_sum{model="gen"}')).toBe(0.25)
    expect(m.get('cohort_generate_time_to_first_token_seconds_bucket{model="gen",le="0.25"}')).toBe(1)
    expect(m.get('cohort_generate_time_to_first_token_seconds_bucket{model="gen",le="0.1"}')).toBe(0)
    expect(m.get('cohort_generate_time_per_output_token_seconds_sum{model="gen"}')).toBe(0.02)
    expect(m.get('cohort_generate_tokens_total{model="gen"}')).toBe(4)
    expect(m.get('cohort_generate_finished_total{model="gen",reason="stop"}')).toBe(1)
    expect(m.get('cohort_generate_running_sequences{model="gen"}')).toBe(3)
    expect(m.get('cohort_generate_waiting_sequences{model="gen"}')).toBe(2)
    expect(m.get('cohort_generate_kv_cache_tokens{model="gen"}')).toBe(96)
    expect(m.get('cohort_generate_kv_cache_budget_tokens{model="gen"}')).toBe(128)
    expect(m.get('cohort_generate_kv_cache_usage_ratio{model="gen"}')).toBe(0.75)
    expect(m.get('cohort_generate_preemptions_total{model="gen"}')).toBe(5)
    gauges.running = 0
    gauges.kvTokens = 0
    m = scrape()
    expect(m.get('cohort_generate_running_sequences{model="gen"}')).toBe(0)
    expect(m.get('cohort_generate_kv_cache_usage_ratio{model="gen"}')).toBe(0)
    await runner.close()
  })
})
