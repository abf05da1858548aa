import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  CohortError,
  decodeReply,
  decodeValue,
  encodeCancel,
  encodeRequest,
  encodeValue,
  jsonToTensor,
  subjects,
  tensorToJson,
  type InferReply,
  type InferRequest,
  type ModelMeta,
} from '@cohort/protocol'
import { Registry, workerMetrics } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import type { BatchingConfig } from '@cohort/batching'
import { CohortWorker } from './worker.ts'
import { ModelServer } from './model-server.ts'
import { PredictorRunner } from './runners/predictor-runner.ts'
import type { ItemResult, RunBatchOptions } from './runners/types.ts'

const subj = subjects()

/** A gate that holds every batch while closed; opened and closed by hand (no sleeps). */
class Gate {
  #p: Promise<void> = Promise.resolve()
  #open: () => void = () => undefined
  close(): void {
    this.#p = new Promise((r) => {
      this.#open = r
    })
  }
  open(): void {
    this.#open()
  }
  wait(): Promise<void> {
    return this.#p
  }
}

/**
 * `calc`: y = 2x. `fail` fails one item (ItemError), `explode` throws for the whole batch,
 * `big` returns a string of that many characters. Records every batch it runs.
 */
function calcPredictor(gate: Gate) {
  const calls: number[][] = []
  const life: string[] = []
  const predictor = definePredictor({
    name: 'calc',
    input: Type.Object({
      x: Type.Number(),
      fail: Type.Boolean({ default: false }),
      explode: Type.Boolean({ default: false }),
      big: Type.Integer({ default: 0, minimum: 0 }),
    }),
    output: Type.Object({ y: Type.Number(), pad: Type.String() }),
    teardown: () => {
      life.push('teardown')
    },
    async predict(inputs) {
      calls.push(inputs.map((i) => i.x))
      await gate.wait()
      if (inputs.some((i) => i.explode)) {
        throw new Error('exploded on purpose')
      }
      return inputs.map((i) => (i.fail ? itemError(`x=${i.x} failed on purpose`) : { y: i.x * 2, pad: 'x'.repeat(i.big) }))
    },
  })
  return { predictor, calls, life }
}

/** A predictor runner that records the `behind` of every batch it is given. */
class BehindRecorder extends PredictorRunner {
  readonly behind: (number | undefined)[] = []
  override runBatch(payloads: unknown[], signal?: AbortSignal, opts: RunBatchOptions = {}): Promise<ItemResult[]> {
    this.behind.push(opts.behind)
    return super.runBatch(payloads, signal, opts)
  }
}

interface Env {
  transport: InProcessTransport
  worker: CohortWorker
  server: ModelServer
  gate: Gate
  calls: number[][]
  life: string[]
  /** `behind` of each batch run, in order. */
  behind: (number | undefined)[]
}

const envs: Env[] = []

async function start(o: { batching?: Partial<BatchingConfig>; maxMessageBytes?: number } = {}): Promise<Env> {
  const transport = new InProcessTransport(o.maxMessageBytes ? { maxMessageBytes: o.maxMessageBytes } : {})
  const gate = new Gate()
  const { predictor, calls, life } = calcPredictor(gate)
  const runner = new BehindRecorder(predictor)
  const worker = new CohortWorker({
    transport,
    id: 'w-test',
    runners: [runner],
    outputSchemas: { calc: predictor.output },
    ...(o.batching ? { batching: o.batching } : {}),
  })
  await worker.start()
  const env = { transport, worker, server: worker.servers[0]!, gate, calls, life, behind: runner.behind }
  envs.push(env)
  return env
}

afterEach(async () => {
  for (const e of envs.splice(0)) {
    e.gate.open()
    await e.worker.drain()
    await e.transport.close()
  }
})

let seq = 0
function request(items: unknown[], extra: Partial<InferRequest> = {}): InferRequest {
  return { v: 1, id: `r${++seq}`, model: 'calc', deadline: Date.now() + 5_000, items, ...extra }
}

async function send(t: InProcessTransport, req: InferRequest): Promise<InferReply> {
  return decodeReply(await t.request(subj.infer(req.model), encodeRequest(req), { timeoutMs: 3_000 }))
}

async function sendRaw(t: InProcessTransport, bytes: Uint8Array): Promise<InferReply> {
  return decodeReply(await t.request(subj.infer('calc'), bytes, { timeoutMs: 3_000 }))
}

const waitFor = (fn: () => void) => vi.waitFor(fn, { timeout: 2_000, interval: 2 })

describe('ModelServer over the in-process transport', () => {
  it('answers items with outputs, timing and the worker id', async () => {
    const { transport, calls } = await start()
    const req = request([{ x: 1 }, { x: 2.5 }])
    const r = await send(transport, req)
    expect(r.id).toBe(req.id)
    expect(r.worker).toBe('w-test')
    expect(r.error).toBeUndefined()
    expect(r.errors).toBeUndefined()
    expect(r.items).toEqual([
      { y: 2, pad: '' },
      { y: 5, pad: '' },
    ])
    expect(r.timing).toHaveLength(2)
    expect(r.timing![0]!.batchSize).toBe(2)
    expect(calls).toEqual([[1, 2.5]])
  })

  it('answers tensor requests with batch-major tensors typed by the output schema', async () => {
    const { transport } = await start()
    const r = await send(transport, {
      v: 1,
      id: 't1',
      model: 'calc',
      deadline: Date.now() + 5_000,
      tensors: { x: jsonToTensor('x', 'INT32', [3], [1, 2, 3]) },
      outputs: ['y'],
    })
    expect(r.error).toBeUndefined()
    expect(Object.keys(r.tensors!)).toEqual(['y'])
    // The schema says number: integral results stay FP64.
    expect(r.tensors!['y']!.datatype).toBe('FP64')
    expect(r.tensors!['y']!.shape).toEqual([3])
    expect(tensorToJson(r.tensors!['y']!)).toEqual([2, 4, 6])
  })

  it('answers metadata with the live batching config', async () => {
    const { transport } = await start({ batching: { maxBatchSize: 7, maxDelayMs: 3 } })
    const meta = decodeValue(await transport.request(subj.meta('calc'), new Uint8Array(0), { timeoutMs: 1_000 })) as ModelMeta
    expect(meta).toMatchObject({ name: 'calc', kind: 'predictor', ready: true, maxBatchSize: 7, maxDelayMs: 3, versions: ['1'] })
    expect(meta.inputs.map((i) => i.name)).toEqual(['x', 'fail', 'explode', 'big'])
    expect(await transport.directory.known('calc')).toBe(true)
  })

  it('answers DEADLINE_EXCEEDED without running when the deadline already passed', async () => {
    const { transport, calls, worker } = await start()
    const r = await send(transport, request([{ x: 1 }, { x: 2 }], { deadline: Date.now() - 1 }))
    expect(r.error).toBeUndefined()
    expect(r.errors).toEqual([
      { code: 'DEADLINE_EXCEEDED', message: 'deadline passed before the item was queued' },
      { code: 'DEADLINE_EXCEEDED', message: 'deadline passed before the item was queued' },
    ])
    expect(r.items).toEqual([null, null])
    expect(r.timing).toEqual([
      { queueMs: 0, computeMs: 0, batchSize: 0 },
      { queueMs: 0, computeMs: 0, batchSize: 0 },
    ])
    expect(calls).toEqual([])
    expect(worker.metrics.items.get({ model: 'calc', code: 'DEADLINE_EXCEEDED' })).toBe(2)
  })

  it('answers DEADLINE_EXCEEDED for an item whose deadline passes while it is queued', async () => {
    const { transport, calls, gate, server } = await start()
    gate.close()
    const first = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const late = await send(transport, request([{ x: 2 }], { deadline: Date.now() + 30 }))
    expect(late.errors).toEqual([{ code: 'DEADLINE_EXCEEDED', message: 'deadline passed while queued; the item did not run' }])
    gate.open()
    expect((await first).items).toEqual([{ y: 2, pad: '' }])
    expect(calls).toEqual([[1]])
  })

  it('fails invalid items alone: the other items of the same request still run', async () => {
    const { transport, calls, worker } = await start()
    const r = await send(transport, request([{ x: 1 }, { x: 'two' }, { x: 3 }, { big: -1, x: 4 }]))
    expect(r.error).toBeUndefined()
    expect(r.items).toEqual([{ y: 2, pad: '' }, null, { y: 6, pad: '' }, null])
    expect(r.errors?.[0]).toBeNull()
    expect(r.errors?.[1]).toEqual({ code: 'INVALID_INPUT', message: 'item 1: /x: Expected number' })
    expect(r.errors?.[2]).toBeNull()
    expect(r.errors?.[3]).toMatchObject({ code: 'INVALID_INPUT' })
    expect(r.errors?.[3]?.message).toMatch(/^item 3: \/big: /)
    // Only the valid items reached predict, in one batch.
    expect(calls).toEqual([[1, 3]])
    expect(worker.metrics.items.get({ model: 'calc', code: 'INVALID_INPUT' })).toBe(2)
    expect(worker.metrics.items.get({ model: 'calc', code: 'OK' })).toBe(2)
  })

  it('fails one item alone when predict returns an itemError for it', async () => {
    const { transport } = await start()
    const r = await send(transport, request([{ x: 1, fail: true }, { x: 2 }]))
    expect(r.errors).toEqual([{ code: 'PREDICTOR_FAILED', message: 'x=1 failed on purpose' }, null])
    expect(r.items).toEqual([null, { y: 4, pad: '' }])
  })

  it('fails every item of a batch that throws (across requests), and the next batch works', async () => {
    const { transport, calls, worker } = await start()
    // Both requests arrive in the same turn, so they share one batch.
    const [a, b] = await Promise.all([send(transport, request([{ x: 1 }])), send(transport, request([{ x: 2, explode: true }, { x: 3 }]))])
    expect(calls).toEqual([[1, 2, 3]])
    const failed = { code: 'PREDICTOR_FAILED', message: 'exploded on purpose' }
    expect(a.errors).toEqual([failed])
    expect(b.errors).toEqual([failed, failed])
    expect(worker.metrics.items.get({ model: 'calc', code: 'PREDICTOR_FAILED' })).toBe(3)
    const next = await send(transport, request([{ x: 5 }]))
    expect(next.errors).toBeUndefined()
    expect(next.items).toEqual([{ y: 10, pad: '' }])
    expect(calls).toEqual([[1, 2, 3], [5]])
  })

  it('answers OVERLOADED when the queue bound is exceeded, without running the refused item', async () => {
    const { transport, calls, gate, server, worker } = await start({ batching: { maxQueue: 2 } })
    gate.close()
    const running = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const queued = send(transport, request([{ x: 2 }, { x: 3 }]))
    await waitFor(() => expect(server.engine.queued).toBe(2))
    const refused = await send(transport, request([{ x: 4 }]))
    expect(refused.errors).toEqual([{ code: 'OVERLOADED', message: 'model "calc" queue is full (2 items, maxQueue); retry later', retryAfterS: 1 }])
    // Still full: refused at once as well.
    const mixed = send(transport, request([{ x: 5 }]))
    gate.open()
    expect((await running).items).toEqual([{ y: 2, pad: '' }])
    expect((await queued).items).toEqual([
      { y: 4, pad: '' },
      { y: 6, pad: '' },
    ])
    expect((await mixed).errors?.[0]?.code).toBe('OVERLOADED')
    expect(calls.flat()).not.toContain(4)
    expect(calls.flat()).not.toContain(5)
    expect(worker.metrics.items.get({ model: 'calc', code: 'OVERLOADED' })).toBe(2)
  })

  it('tells the runner what waits behind each batch (items queued, other batches running): 0 alone, 1 with an item queued', async () => {
    const { transport, gate, server, behind } = await start({ batching: { maxBatchSize: 1 } })
    gate.close()
    const first = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const second = send(transport, request([{ x: 2 }]))
    const third = send(transport, request([{ x: 3 }]))
    await waitFor(() => expect(server.engine.queued).toBe(2))
    gate.open()
    await Promise.all([first, second, third])
    // The first ran alone; the second left the third queued behind it; the third ran alone.
    expect(behind).toEqual([0, 1, 0])
  })

  it('refuses at once (503 OVERLOADED, shed reason admission) an item estimated to finish after its deadline', async () => {
    const { transport, calls, gate, server, worker } = await start({ batching: { maxBatchSize: 1 } })
    for (let i = 0; i < 8; i++) server.engine.costModel.observe(1, 200) // learned: 200 ms per batch
    gate.close()
    const running = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const queued = send(transport, request([{ x: 2 }])) // deadline in 5 s: fits behind the running one
    await waitFor(() => expect(server.engine.queued).toBe(1))
    // Behind one running and one queued batch of 200 ms, a 300 ms deadline cannot be met.
    const refused = await send(transport, request([{ x: 3 }], { deadline: Date.now() + 300 }))
    expect(refused.errors?.[0]).toMatchObject({ code: 'OVERLOADED', retryAfterS: 1 })
    expect(refused.errors?.[0]?.message).toMatch(/cannot finish this item within its deadline/)
    expect(server.engine.queued).toBe(1) // answered without queueing, while the gate is still closed
    gate.open()
    expect((await running).items).toEqual([{ y: 2, pad: '' }])
    expect((await queued).items).toEqual([{ y: 4, pad: '' }])
    expect(calls.flat()).not.toContain(3)
    expect(worker.metrics.shed.get({ model: 'calc', reason: 'admission' })).toBe(1)
  })

  it('answers 413 TOO_MANY_ITEMS (not 503) for a request with more items than maxQueue, naming the bound, without running any', async () => {
    const { transport, calls } = await start({ batching: { maxQueue: 2 } })
    const r = await send(transport, request([{ x: 1 }, { x: 2 }, { x: 3 }]))
    expect(r.error?.code).toBe('TOO_MANY_ITEMS')
    expect(r.error?.retryAfterS).toBeUndefined()
    expect(r.error?.message).toBe('request holds 3 items (rows); model "calc" queues at most 2 (maxQueue): split it into requests of at most 2')
    expect(calls).toEqual([])
  })

  it('refuses a request that fits maxQueue but not the room left now whole, with 503 and Retry-After', async () => {
    const { transport, calls, gate, server } = await start({ batching: { maxQueue: 3 } })
    gate.close()
    const running = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const queued = send(transport, request([{ x: 2 }, { x: 3 }]))
    await waitFor(() => expect(server.engine.queued).toBe(2))
    const r = await send(transport, request([{ x: 4 }, { x: 5 }]))
    expect(r.errors?.map((e) => e?.code)).toEqual(['OVERLOADED', 'OVERLOADED'])
    expect(r.errors?.[0]?.retryAfterS).toBeGreaterThanOrEqual(1)
    expect(r.errors?.[0]?.message).toMatch(/no room for this request's 2 items now \(maxQueue 3\)/)
    expect(server.engine.queued).toBe(2) // nothing of it was queued
    gate.open()
    await running
    await queued
    expect(calls.flat()).not.toContain(4)
    expect(calls.flat()).not.toContain(5)
  })

  it('drops queued items on a cancel notice (and ignores garbage and unknown ids on the cancel subject)', async () => {
    const { transport, calls, gate, server, worker } = await start()
    gate.close()
    const running = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const victim = request([{ x: 2 }, { x: 3 }])
    const keeper = request([{ x: 4 }])
    const victimReply = send(transport, victim)
    const keeperReply = send(transport, keeper)
    await waitFor(() => expect(server.engine.queued).toBe(3))
    transport.publish(subj.cancel('calc'), new Uint8Array([0xc1, 0x00]))
    transport.publish(subj.cancel('calc'), encodeCancel({ v: 1, id: 'no-such-request' }))
    transport.publish(subj.cancel('calc'), encodeCancel({ v: 1, id: victim.id }))
    const cancelled = await victimReply
    const gone = { code: 'CANCELLED', message: 'the client went away; the item did not run' }
    expect(cancelled.errors).toEqual([gone, gone])
    expect(server.engine.queued).toBe(1)
    gate.open()
    expect((await running).items).toEqual([{ y: 2, pad: '' }])
    expect((await keeperReply).items).toEqual([{ y: 8, pad: '' }])
    expect(calls).toEqual([[1], [4]])
    expect(worker.metrics.items.get({ model: 'calc', code: 'CANCELLED' })).toBe(2)
  })

  it('drain() finishes running and queued work before resolving, then takes no new work', async () => {
    const { transport, calls, gate, server, worker, life } = await start()
    gate.close()
    const running = send(transport, request([{ x: 1 }]))
    await waitFor(() => expect(server.engine.running).toBe(1))
    const queued = send(transport, request([{ x: 2 }, { x: 3 }]))
    await waitFor(() => expect(server.engine.queued).toBe(2))
    let drained = false
    const d = worker.drain().then(() => {
      drained = true
    })
    await new Promise((r) => setTimeout(r, 30))
    expect(drained).toBe(false)
    expect(life).toEqual([])
    // The model's subjects are gone: new requests get no responders at once.
    await expect(transport.request(subj.infer('calc'), encodeRequest(request([{ x: 9 }])), { timeoutMs: 1_000 })).rejects.toMatchObject({
      code: 'NO_WORKER',
    })
    gate.open()
    await d
    expect(drained).toBe(true)
    expect((await running).items).toEqual([{ y: 2, pad: '' }])
    const q = await queued
    expect(q.errors).toBeUndefined()
    expect(q.items).toEqual([
      { y: 4, pad: '' },
      { y: 6, pad: '' },
    ])
    expect(calls).toEqual([[1], [2, 3]])
    expect(life).toEqual(['teardown'])
    expect(server.engine.closed).toBe(true)
  })

  it('drain() right after a request arrives still answers it', async () => {
    const { transport, worker, calls } = await start()
    const reply = send(transport, request([{ x: 21 }]))
    await worker.drain()
    expect((await reply).items).toEqual([{ y: 42, pad: '' }])
    expect(calls).toEqual([[21]])
  })

  it('answers RESPONSE_TOO_LARGE when the reply exceeds the transport max payload, and keeps serving', async () => {
    const { transport, calls } = await start({ maxMessageBytes: 4096 })
    const req = request([{ x: 1, big: 10_000 }])
    const r = await send(transport, req)
    expect(r.id).toBe(req.id)
    expect(r.items).toBeUndefined()
    expect(r.error?.code).toBe('RESPONSE_TOO_LARGE')
    expect(r.error?.message).toMatch(/exceeds the bus limit \(maxMessageBytes\) of 4096 bytes/)
    expect(calls).toEqual([[1]])
    const ok = await send(transport, request([{ x: 2, big: 100 }]))
    expect(ok.error).toBeUndefined()
    expect((ok.items?.[0] as { pad: string }).pad).toHaveLength(100)
  })

  it('answers garbage and malformed envelopes with BAD_REQUEST and keeps serving', async () => {
    const { transport, calls } = await start()
    const garbage = await sendRaw(transport, new Uint8Array([0xc1, 0xff, 0x00, 0x13]))
    expect(garbage.id).toBe('')
    expect(garbage.error?.code).toBe('BAD_REQUEST')
    expect(garbage.error?.message).toMatch(/msgpack/)
    const wrongVersion = await sendRaw(transport, encodeValue({ v: 3, id: 'x', model: 'calc', deadline: Date.now() + 1000, items: [] }))
    expect(wrongVersion.error).toMatchObject({ code: 'BAD_REQUEST', message: 'request.v must be 1, got 3' })
    const emptyPack = await sendRaw(transport, encodeValue({ v: 2, reqs: [] }))
    expect(emptyPack.error).toMatchObject({ code: 'BAD_REQUEST', message: 'pack.reqs must be an array of 1 to 256 requests' })
    const both = await sendRaw(
      transport,
      encodeValue({ v: 1, id: 'both', model: 'calc', deadline: Date.now() + 1000, items: [{ x: 1 }], tensors: { x: jsonToTensor('x', 'FP64', [1], [1]) } }),
    )
    expect(both.error).toMatchObject({ code: 'BAD_REQUEST', message: 'request has both tensors and items' })
    const empty = await sendRaw(transport, new Uint8Array(0))
    expect(empty.error?.code).toBe('BAD_REQUEST')
    expect(calls).toEqual([])
    const ok = await send(transport, request([{ x: 4 }]))
    expect(ok.items).toEqual([{ y: 8, pad: '' }])
  })

  it('answers an empty request at once with no items', async () => {
    const { transport, calls } = await start()
    const r = await send(transport, request([]))
    expect(r.error).toBeUndefined()
    expect(r.items).toEqual([])
    expect(calls).toEqual([])
  })
})

describe('ModelServer used directly', () => {
  it('serves one runner on its subjects with the given subject prefix and closes the runner on drain', async () => {
    const transport = new InProcessTransport()
    const gate = new Gate()
    const { predictor, life } = calcPredictor(gate)
    const runner = new PredictorRunner(predictor)
    await runner.start()
    const s = subjects('alt')
    const server = new ModelServer({
      runner,
      transport,
      subjects: s,
      metrics: workerMetrics(new Registry()),
      workerId: 'direct',
      batching: { maxBatchSize: 1 },
    })
    await server.start()
    expect(server.meta().maxBatchSize).toBe(1)
    const req = request([{ x: 1 }, { x: 2 }])
    const r = decodeReply(await transport.request(s.infer('calc'), encodeRequest(req), { timeoutMs: 2_000 }))
    expect(r.worker).toBe('direct')
    expect(r.items).toEqual([
      { y: 2, pad: '' },
      { y: 4, pad: '' },
    ])
    // maxBatchSize 1: each item ran in its own batch.
    expect(r.timing?.map((t) => t.batchSize)).toEqual([1, 1])
    // Nothing listens on the default prefix.
    await expect(transport.request(subj.infer('calc'), encodeRequest(req), { timeoutMs: 500 })).rejects.toBeInstanceOf(CohortError)
    await server.drain()
    expect(life).toEqual(['teardown'])
    await transport.close()
  })
})

describe('priorities under overload', () => {
  it('serves the high level first when both levels are queued', async () => {
    const { transport, gate, calls, server } = await start({ batching: { maxBatchSize: 2 } })
    gate.close()
    const via = (req: InferRequest) => transport.request(subj.overflow('calc'), encodeRequest(req), { timeoutMs: 3_000 }).then(decodeReply)
    const first = via(request([{ x: 0 }]))
    await waitFor(() => expect(calls).toEqual([[0]]))
    const low = [1, 2, 3, 4].map((x) => via(request([{ x }], { priority: 0 })))
    const high = [10, 11].map((x) => via(request([{ x }], { priority: 5 })))
    await waitFor(() => expect(server.engine.queued).toBe(6))
    gate.open()
    await Promise.all([first, ...low, ...high])
    expect(calls[1]).toEqual([10, 11])
    expect(calls.slice(2).flat().sort()).toEqual([1, 2, 3, 4])
  })
})

describe('capacity-aware distribution', () => {
  it('leaves the main subject when full and comes back once the queue drains', async () => {
    const { transport, gate, server } = await start({ batching: { maxBatchSize: 2 } })
    gate.close()
    const via = (subject: string, x: number) => transport.request(subject, encodeRequest(request([{ x }])), { timeoutMs: 3_000 }).then(decodeReply)
    // One batch running plus 2 * maxBatchSize queued = the high-water mark.
    const held = [0, 1, 2, 3, 4].map((x) => via(subj.infer('calc'), x))
    await waitFor(() => expect(server.paused).toBe(true))
    await expect(via(subj.infer('calc'), 9)).rejects.toMatchObject({ code: 'NO_WORKER' })
    const overflow = via(subj.overflow('calc'), 7)
    gate.open()
    const replies = await Promise.all([...held, overflow])
    expect(replies.map((r) => (r.items?.[0] as { y: number }).y)).toEqual([0, 2, 4, 6, 8, 14])
    await waitFor(() => expect(server.paused).toBe(false))
    expect((await via(subj.infer('calc'), 5)).items).toEqual([{ y: 10, pad: '' }])
  })
})
