// The engine's figures for metrics (docs/metrics.md#generative-models): watcher calls (first
// tokens, ends) on a fake clock, gauges while running and after, preemptions under a small budget.
import type { GenerateResult, GenerationSink, GenerationTiming } from '@cohort/protocol'
import { describe, expect, it } from 'vitest'
import { byteTokenizer } from './byte-tokenizer.ts'
import { Engine, type EngineOptions } from './engine.ts'
import type { DecoderSession, DecoderSpec, TensorLike } from './session.ts'

const V = 257
const FAR = 1e15

/** A fake decoder (next token t + 1 mod 256) whose every run takes `runMs` on the fake clock. */
function clockedSession(clock: { now: number }, runMs: number): DecoderSession {
  return {
    async run(feeds: Record<string, TensorLike>): Promise<Record<string, TensorLike>> {
      await Promise.resolve()
      clock.now += runMs
      const ids = feeds['input_ids'] as TensorLike
      const [b, sLen] = ids.dims as [number, number]
      const logits = new Float32Array(b * sLen * V)
      for (let i = 0; i < b * sLen; i++) {
        logits[i * V + ((Number((ids.data as BigInt64Array)[i]) + 1) % 256)] = 10
      }
      return { logits: { type: 'float32', data: logits, dims: [b, sLen, V] } }
    },
  }
}

function watched(o: Partial<EngineOptions> & { maxContext?: number }, runMs = 10) {
  const clock = { now: 0 }
  const model: DecoderSpec = { layers: 1, kvHeads: 1, headDim: 2, vocabSize: V, maxContext: o.maxContext ?? 256, eosId: 256, layout: 'gqa-shared' }
  const e = new Engine({ session: clockedSession(clock, runMs), model, tokenizer: byteTokenizer, now: () => clock.now, ...o })
  const firsts: number[] = []
  const ends: GenerationTiming[] = []
  e.watch({ firstToken: (ms) => firsts.push(ms), finished: (t) => ends.push(t) })
  return { e, clock, firsts, ends }
}

function sink(): GenerationSink & { result?: GenerateResult } {
  const s: GenerationSink & { result?: GenerateResult } = { delta: () => undefined, done: (r) => (s.result = r), error: () => undefined }
  return s
}

async function drain(e: Engine): Promise<void> {
  for (let i = 0; i < 10_000 && (await e.step()); i++) {
    // steps until idle
  }
}

describe('Engine metrics (fake clock, fake decoder)', () => {
  it('reports each first token as sampled and each end with its TTFT, TPOT and token counts', async () => {
    const { e, clock, firsts, ends } = watched({})
    const a = sink()
    const b = sink()
    e.submit({ prompt: [1, 2, 3], params: { maxTokens: 8, temperature: 0, ignoreEos: true }, stream: true }, FAR, a)
    e.submit({ prompt: [40, 41], params: { maxTokens: 8, temperature: 0, ignoreEos: true }, stream: false }, FAR, b)
    expect(e.gauges()).toMatchObject({ running: 0, waiting: 2, kvTokens: 0, preemptions: 0 })
    await e.step()
    // Step 1 prefills a (run ends at 10 ms: its first token) then b (20 ms).
    expect(firsts).toEqual([10, 20])
    expect(e.gauges()).toEqual({ running: 2, waiting: 0, kvTokens: 5, kvBudgetTokens: 16 * 256, preemptions: 0 })
    await drain(e)
    // Then one decode run per step for both: tokens 2..8 at 30, 40, ... 90 ms.
    expect(clock.now).toBe(90)
    expect(ends).toHaveLength(2)
    const byPrompt = new Map(ends.map((t) => [t.promptTokens, t]))
    expect(byPrompt.get(3)).toMatchObject({ reason: 'length', completionTokens: 8, ttftMs: 10 })
    expect(byPrompt.get(3)?.tpotMs).toBeCloseTo(80 / 7, 9)
    expect(byPrompt.get(2)).toMatchObject({ reason: 'length', completionTokens: 8, ttftMs: 20, tpotMs: 10 })
    expect(a.result?.usage.completionTokens).toBe(8)
    expect(b.result?.usage.completionTokens).toBe(8)
    expect(e.metrics().generatedTokens).toBe(16)
    expect(e.gauges()).toMatchObject({ running: 0, waiting: 0, kvTokens: 0 })
    await e.close()
  })

  it('calls finished before the sink hears of the end, also for deadlines (after a token: finish reason deadline; before one: an error) and cancels', async () => {
    const { e, clock, ends } = watched({})
    const seen: string[] = []
    const s = (name: string): GenerationSink => ({
      delta: () => undefined,
      done: (r) => seen.push(`${name}:${r.finishReason}:${ends.length}`),
      error: (x) => seen.push(`${name}:${x.code}:${ends.length}`),
    })
    e.submit({ prompt: [1], params: { maxTokens: 100, temperature: 0, ignoreEos: true }, stream: true }, 25, s('late'))
    const h = e.submit({ prompt: [2], params: { maxTokens: 100, temperature: 0, ignoreEos: true }, stream: true }, FAR, s('gone'))
    await e.step()
    h.cancel()
    clock.now = 30
    e.submit({ prompt: [3], params: { maxTokens: 100, temperature: 0, ignoreEos: true }, stream: true }, 30, s('never'))
    await e.step()
    expect(seen.map((x) => x.replace(/:\d+$/, '')).sort()).toEqual(['gone:cancelled', 'late:deadline', 'never:DEADLINE_EXCEEDED'])
    // Each sink heard of its end right after its own finished call (1, 2, 3 in the order the sweep took them).
    expect(seen.map((x) => Number(x.split(':')[2])).sort()).toEqual([1, 2, 3])
    expect(ends.map((t) => t.reason).sort()).toEqual(['cancelled', 'deadline', 'error'])
    await e.close()
  })

  it('counts preemptions when the KV budget runs out, and every sequence still ends with its tokens', async () => {
    const { e, ends } = watched({ maxContext: 16, kvBudgetTokens: 16, maxSequences: 2 })
    const sinks = [sink(), sink()]
    e.submit({ prompt: [1, 2, 3, 4, 5, 6], params: { maxTokens: 8, temperature: 0, ignoreEos: true }, stream: true }, FAR, sinks[0]!)
    e.submit({ prompt: [50, 51, 52, 53, 54, 55], params: { maxTokens: 8, temperature: 0, ignoreEos: true }, stream: true }, FAR, sinks[1]!)
    let maxUsage = 0
    while (await e.step()) {
      const g = e.gauges()
      expect(g.kvTokens).toBeLessThanOrEqual(g.kvBudgetTokens)
      maxUsage = Math.max(maxUsage, g.kvTokens / g.kvBudgetTokens)
    }
    // Both admitted (6 + 6 <= 16); at 8 + 8 + 1 > 16 the later one is preempted and recomputed.
    expect(e.gauges().preemptions).toBeGreaterThanOrEqual(1)
    expect(e.gauges().preemptions).toBe(e.metrics().preemptions)
    expect(maxUsage).toBeGreaterThan(0.5)
    expect(ends.map((t) => t.completionTokens)).toEqual([8, 8])
    expect(sinks.map((s) => s.result?.tokens)).toEqual([
      [7, 8, 9, 10, 11, 12, 13, 14],
      [56, 57, 58, 59, 60, 61, 62, 63],
    ])
    expect(e.metrics().generatedTokens).toBe(16)
    await e.close()
  })
})
