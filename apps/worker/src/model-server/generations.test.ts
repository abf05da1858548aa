import { describe, expect, it } from 'vitest'
import { decodeNotice, encodeCancel, encodeValue, subjects, type GatewayNotice, type GenerateInput, type Generator, type GenerationSink, type InferRequest } from '@cohort/protocol'
import { Registry, workerMetrics } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { ModelServer } from '../model-server.ts'
import { GenerativeRunner } from '../runners/generative-runner.ts'

const s = subjects()

/**
 * A step-loop generator: each step (one macrotask) gives every running sequence one token ("x"),
 * ending each at its maxTokens. Counts steps and running sequences.
 */
function stepper() {
  const running = new Set<{ left: number; out: number[]; sink: GenerationSink; cancelled: boolean; prompt: number }>()
  const stats = { steps: 0, cancelled: 0, running: () => running.size }
  let scheduled = false
  /** One step a macrotask from now, unless one is already due. */
  const schedule = () => {
    if (!scheduled) {
      scheduled = true
      setTimeout(step, 1)
    }
  }
  const step = () => {
    scheduled = false
    stats.steps++
    for (const q of [...running]) {
      if (q.cancelled) {
        running.delete(q)
        stats.cancelled++
        q.sink.done({ text: 'x'.repeat(q.out.length), tokens: q.out, finishReason: 'cancelled', usage: { promptTokens: q.prompt, completionTokens: q.out.length } })
        continue
      }
      q.out.push(120)
      q.sink.delta({ tokens: [120], text: 'x' })
      if (--q.left === 0) {
        running.delete(q)
        q.sink.done({ text: 'x'.repeat(q.out.length), tokens: q.out, finishReason: 'length', usage: { promptTokens: q.prompt, completionTokens: q.out.length } })
      }
    }
    if (running.size > 0) {
      schedule()
    }
  }
  const g: Generator = {
    info: { maxContext: 100, vocabSize: 128 },
    submit(input: GenerateInput, _deadline: number, sink: GenerationSink) {
      const q = { left: input.params.maxTokens, out: [] as number[], sink, cancelled: false, prompt: String(input.prompt).length }
      running.add(q)
      schedule()
      return { cancel: () => void (q.cancelled = true) }
    },
    close: () => Promise.resolve(),
  }
  return { g, stats }
}

async function serve() {
  const transport = new InProcessTransport()
  const { g, stats } = stepper()
  const server = new ModelServer({ runner: new GenerativeRunner('gen', () => g), transport, subjects: s, metrics: workerMetrics(new Registry()), workerId: 'w1' })
  await server.runner.start()
  await server.start()
  const notices: GatewayNotice[] = []
  const sub = transport.subscribe(`${s.inbox('gw1')}.>`)
  void (async () => {
    for await (const m of sub) {
      notices.push(decodeNotice(m.data))
    }
  })()
  const gen = (id: string, maxTokens: number, stream = true): InferRequest => ({
    v: 1,
    id,
    model: 'gen',
    deadline: Date.now() + 10_000,
    generate: { prompt: 'hi', params: { maxTokens }, stream },
  })
  const send = (reqs: InferRequest[]) => transport.publish(s.infer('gen'), encodeValue({ v: 2, reqs }), { reply: `${s.inbox('gw1')}.0` })
  return { transport, server, stats, notices, gen, send }
}

const until = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 2))
}

describe('generations on the worker', () => {
  it("sends one tokens message per step per pack, each request's deltas before its reply", async () => {
    const { server, stats, notices, gen, send } = await serve()
    send([gen('a', 5), gen('b', 3), gen('c', 4), gen('quiet', 4, false)])
    await until(() => notices.filter((n) => n.t === 'replies').flatMap((n) => n.replies).length === 4)
    const tokens = notices.filter((n) => n.t === 'tokens')
    // One message per step (5 steps: the longest request), not one per token (12 deltas).
    expect(stats.steps).toBe(5)
    expect(tokens).toHaveLength(5)
    expect(
      tokens.map((n) =>
        n.steps
          .map((x) => x.id)
          .sort()
          .join(),
      ),
    ).toEqual(['a,b,c', 'a,b,c', 'a,b,c', 'a,c', 'a'])
    // Order on the wire: every token of a request comes before its reply.
    for (const id of ['a', 'b', 'c']) {
      const lastDelta = notices.findLastIndex((n) => n.t === 'tokens' && n.steps.some((x) => x.id === id))
      const reply = notices.findIndex((n) => n.t === 'replies' && n.replies.some((r) => r.id === id))
      expect(lastDelta).toBeLessThan(reply)
    }
    const replies = notices.flatMap((n) => (n.t === 'replies' ? n.replies : []))
    expect(replies.find((r) => r.id === 'quiet')?.generated).toMatchObject({ text: 'xxxx', finishReason: 'length' })
    expect(replies.find((r) => r.id === 'a')?.generated?.usage).toEqual({ promptTokens: 2, completionTokens: 5 })
    expect(server.meta()).toMatchObject({ kind: 'generative', generative: { maxContext: 100, vocabSize: 128 } })
    expect(server.meta().slo).toBeUndefined()
    await server.drain()
  })

  it('a cancel notice frees the slot at the next step; a non-generate request is refused naming the APIs', async () => {
    const { transport, server, stats, notices, gen, send } = await serve()
    send([gen('long', 90)])
    await until(() => notices.some((n) => n.t === 'tokens'))
    expect(stats.running()).toBe(1)
    transport.publish(s.cancel('gen'), encodeCancel({ v: 1, id: 'long' }))
    await until(() => stats.running() === 0)
    expect(server.runningGenerations).toBe(0)
    send([{ v: 1, id: 'tensor', model: 'gen', deadline: Date.now() + 1000, items: [1] }])
    await until(() => notices.some((n) => n.t === 'replies' && n.replies.some((r) => r.id === 'tensor')))
    const refused = notices.flatMap((n) => (n.t === 'replies' ? n.replies : [])).find((r) => r.id === 'tensor')
    expect(refused?.error?.code).toBe('BAD_REQUEST')
    expect(refused?.error?.message).toMatch(/is generative: send POST \/v2\/models\/gen\/generate/)
    await server.drain()
  })
})

describe('a gateway that goes away', () => {
  it("frees its streams' slots at the next step: the step's tokens message finds no subscriber, NATS-style", async () => {
    const transport = new InProcessTransport()
    const { g, stats } = stepper()
    // probeMs 0: only the per-step tokens messages can notice it.
    const server = new ModelServer({
      runner: new GenerativeRunner('gen', () => g),
      transport,
      subjects: s,
      metrics: workerMetrics(new Registry()),
      workerId: 'w1',
      generationProbeMs: 0,
    })
    await server.runner.start()
    await server.start()
    const inbox = transport.subscribe(`${s.inbox('gw1')}.>`)
    let tokens = 0
    void (async () => {
      for await (const m of inbox) {
        if (decodeNotice(m.data).t === 'tokens') tokens++
      }
    })()
    const gen = (id: string): InferRequest => ({ v: 1, id, model: 'gen', deadline: Date.now() + 60_000, generate: { prompt: 'hi', params: { maxTokens: 90 }, stream: true } })
    transport.publish(s.infer('gen'), encodeValue({ v: 2, reqs: [gen('a'), gen('b')] }), { reply: `${s.inbox('gw1')}.0` })
    await until(() => tokens >= 2)
    expect(stats.running()).toBe(2)
    inbox.unsubscribe() // the gateway is gone: nobody subscribes to its inbox any more
    const at = stats.steps
    await until(() => stats.running() === 0)
    // Step `at` (or `at + 1`, if one was under way) published into the void; the no-responders status
    // cancelled both, and the step after that one freed the slots.
    expect(stats.steps - at).toBeLessThanOrEqual(3)
    expect(stats.cancelled).toBe(2)
    expect(server.runningGenerations).toBe(0)
    await server.drain()
  })

  it('a non-streamed generation is watched by the slow probe (an empty tokens message)', async () => {
    const transport = new InProcessTransport()
    const { g, stats } = stepper()
    const server = new ModelServer({
      runner: new GenerativeRunner('gen', () => g),
      transport,
      subjects: s,
      metrics: workerMetrics(new Registry()),
      workerId: 'w1',
      generationProbeMs: 20,
    })
    await server.runner.start()
    await server.start()
    const inbox = transport.subscribe(`${s.inbox('gw1')}.>`)
    let accepted = false
    let probes = 0
    void (async () => {
      for await (const m of inbox) {
        const n = decodeNotice(m.data)
        if (n.t === 'accept') accepted = true
        if (n.t === 'tokens' && n.steps.length === 0 && m.reply !== undefined) probes++
      }
    })()
    const req: InferRequest = { v: 1, id: 'quiet', model: 'gen', deadline: Date.now() + 60_000, generate: { prompt: 'hi', params: { maxTokens: 90 }, stream: false } }
    transport.publish(s.infer('gen'), encodeValue({ v: 2, reqs: [req] }), { reply: `${s.inbox('gw1')}.0` })
    await until(() => accepted && probes >= 1)
    expect(stats.running()).toBe(1)
    inbox.unsubscribe()
    await until(() => stats.running() === 0)
    expect(stats.cancelled).toBe(1) // cancelled, not ended at its maxTokens
    expect(server.runningGenerations).toBe(0)
    await server.drain()
  })
})
