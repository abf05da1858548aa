// The generation routes in one process (InProcessTransport, a real CohortWorker and a step-loop
// Generator): the protocol v1 fallback and a worker that closes mid-stream.
import { afterEach, describe, expect, it } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, GenerativeRunner } from '@cohort/worker'
import type { GenerateInput, Generator, GenerationSink } from '@cohort/protocol'
import { createApp } from '../app.ts'
import type { GatewayOptions } from '../options.ts'

/** Each macrotask gives every running sequence one "ab"-cycling token; `close` fails them SHUTTING_DOWN. */
function generator(): Generator & { running: () => number } {
  const seqs = new Set<{ n: number; left: number; text: string; sink: GenerationSink }>()
  let timer: ReturnType<typeof setTimeout> | undefined
  const tick = () => {
    timer = undefined
    for (const q of [...seqs]) {
      const ch = q.n++ % 2 === 0 ? 'a' : 'b'
      q.text += ch
      q.sink.delta({ tokens: [ch.charCodeAt(0)], text: ch })
      if (--q.left === 0) {
        seqs.delete(q)
        q.sink.done({ text: q.text, tokens: Array.from(q.text).map((c) => c.charCodeAt(0)), finishReason: 'length', usage: { promptTokens: 1, completionTokens: q.text.length } })
      }
    }
    if (seqs.size > 0) timer = setTimeout(tick, 1)
  }
  return {
    info: { maxContext: 10_000, vocabSize: 128 },
    running: () => seqs.size,
    submit(input: GenerateInput, _deadline: number, sink: GenerationSink) {
      const q = { n: 0, left: input.params.maxTokens, text: '', sink }
      seqs.add(q)
      timer ??= setTimeout(tick, 1)
      return { cancel: () => seqs.delete(q) }
    },
    close() {
      for (const q of seqs) q.sink.error({ code: 'SHUTTING_DOWN', message: 'the worker closed while generating; retry', retryAfterS: 1 })
      seqs.clear()
      return Promise.resolve()
    },
  }
}

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

async function stack(gateway: Partial<GatewayOptions> = {}) {
  const transport = new InProcessTransport()
  const g = generator()
  const runner = new GenerativeRunner('ab', () => g)
  const worker = new CohortWorker({ transport, runners: [runner], heartbeatMs: 50 })
  await worker.start()
  const app = createApp({ transport, metaTimeoutMs: 100, ...gateway })
  cleanups.push(async () => {
    await worker.close()
    await transport.close()
  })
  const post = (path: string, body: unknown) => app.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { g, runner, post }
}

const events = async (r: Response) =>
  (await r.text())
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => b.slice(6))

describe('generation routes in process', () => {
  it('over protocol v1 (worker-loss detection off: no packs) a stream is the whole text as one delta', async () => {
    const { post } = await stack({ workerLoss: false })
    const r = await post('/v2/models/ab/generate_stream', { text_input: 'x', parameters: { max_tokens: 6 } })
    expect(r.status).toBe(200)
    const ev = (await events(r)).map((e) => JSON.parse(e) as { text_output: string; finish_reason?: string })
    expect(ev).toEqual([
      { model_name: 'ab', model_version: '1', text_output: 'ababab' },
      { model_name: 'ab', model_version: '1', text_output: '', finish_reason: 'length', usage: { prompt_tokens: 1, completion_tokens: 6, total_tokens: 7 } },
    ])
  })

  it('a worker that closes mid-stream ends the stream with a retryable error event (no [DONE])', async () => {
    const { g, runner, post } = await stack()
    const r = await post('/v1/completions', { model: 'ab', prompt: 'x', max_tokens: 60_000, stream: true })
    expect(r.status).toBe(200)
    const reader = r.body!.getReader()
    await reader.read()
    expect(g.running()).toBe(1)
    await runner.close()
    let text = ''
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    expect(text).not.toContain('[DONE]')
    const last = JSON.parse(text.trim().split('\n\n').at(-1)!.slice(6)) as { error: { code: string; message: string } }
    expect(last.error.code).toBe('SHUTTING_DOWN')
    expect(last.error.message).toMatch(/retry/)
    expect(g.running()).toBe(0)
  })
})
