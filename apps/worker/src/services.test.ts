// The NATS services protocol (ADR-32) on workers, over the in-process transport: $SRV.PING / INFO /
// STATS shapes, counters after real requests, name- and id-qualified subjects, drain.
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  decodeReply,
  encodeRequest,
  subjects,
  type InferReply,
  type InferRequest,
  type ServiceInfoResponse,
  type ServicePingResponse,
  type ServiceStatsResponse,
} from '@cohort/protocol'
import { parsePrometheus } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { CohortWorker } from './worker.ts'
import { PredictorRunner } from './runners/predictor-runner.ts'

const subj = subjects()
const dec = new TextDecoder()
const EMPTY = new Uint8Array(0)

/** Holds every batch while closed. */
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

function predictors(gate: Gate) {
  const double = definePredictor({
    name: 'double',
    input: Type.Object({ x: Type.Number() }),
    output: Type.Object({ y: Type.Number() }),
    batch: { maxBatchSize: 8 },
    async predict(xs) {
      await gate.wait()
      return xs.map((i) => (i.x === 13 ? itemError('unlucky 13') : { y: i.x * 2 }))
    },
  })
  const echo = definePredictor({
    name: 'echo',
    input: Type.Object({ s: Type.String() }),
    predict: (xs) => xs.map((i) => i.s),
  })
  return [double, echo]
}

interface Env {
  transport: InProcessTransport
  workers: CohortWorker[]
  gate: Gate
}

const envs: Env[] = []

async function start(ids: string[]): Promise<Env> {
  const transport = new InProcessTransport()
  const gate = new Gate()
  const workers: CohortWorker[] = []
  for (const id of ids) {
    const w = new CohortWorker({ transport, id, runners: predictors(gate).map((p) => new PredictorRunner(p)) })
    await w.start()
    workers.push(w)
  }
  const env = { transport, workers, gate }
  envs.push(env)
  return env
}

afterEach(async () => {
  for (const e of envs.splice(0)) {
    e.gate.open()
    await Promise.all(e.workers.map((w) => w.drain()))
    await e.transport.close()
  }
})

async function all<T extends { id?: unknown } = { id?: unknown }>(t: InProcessTransport, subject: string): Promise<T[]> {
  const replies = await t.requestAll(subject, EMPTY, { timeoutMs: 20 })
  return replies.map((r) => JSON.parse(dec.decode(r)) as T).sort((a, b) => String(a.id).localeCompare(String(b.id)))
}

async function one<T>(t: InProcessTransport, subject: string): Promise<T> {
  return JSON.parse(dec.decode(await t.request(subject, EMPTY, { timeoutMs: 1_000 }))) as T
}

let seq = 0
async function infer(t: InProcessTransport, model: string, items: unknown[]): Promise<InferReply> {
  const req: InferRequest = { v: 1, id: `r${++seq}`, model, deadline: Date.now() + 5_000, items }
  return decodeReply(await t.request(subj.infer(model), encodeRequest(req), { timeoutMs: 3_000 }))
}

describe('worker services protocol ($SRV)', () => {
  it('answers $SRV.PING from every worker with its identity', async () => {
    const { transport } = await start(['w-a', 'w-b'])
    const pings = await all<ServicePingResponse>(transport, '$SRV.PING')
    expect(pings).toEqual([
      {
        type: 'io.nats.micro.v1.ping_response',
        name: 'cohort-worker',
        id: 'w-a',
        version: '0.1.0',
        metadata: { models: 'double,echo', subject_prefix: 'cohort', state: 'serving' },
      },
      expect.objectContaining({ type: 'io.nats.micro.v1.ping_response', id: 'w-b', name: 'cohort-worker' }),
    ])
    expect(pings[0]!.version).toMatch(/^\d+\.\d+\.\d+/)
    expect(await all(transport, '$SRV.PING.cohort-worker')).toHaveLength(2)
    expect(await all(transport, '$SRV.PING.other-service')).toEqual([])
  })

  it('answers $SRV.INFO with one endpoint per model: subject, queue group, batching metadata (strings)', async () => {
    const { transport, workers } = await start(['w-a'])
    workers[0]!.configure({ policy: 'timer', maxDelayMs: 4 }, 'echo')
    const info = await one<ServiceInfoResponse>(transport, '$SRV.INFO')
    expect(info).toMatchObject({
      type: 'io.nats.micro.v1.info_response',
      name: 'cohort-worker',
      id: 'w-a',
      version: '0.1.0',
      metadata: { models: 'double,echo' },
      description: expect.stringContaining('Cohort'),
    })
    expect(info.endpoints).toEqual([
      {
        name: 'double',
        subject: 'cohort.infer.double',
        queue_group: 'cohort.q.double',
        metadata: expect.objectContaining({ max_batch_size: '8', policy: 'eager', ready: 'true', kind: 'predictor', concurrency: '1' }),
      },
      {
        name: 'echo',
        subject: 'cohort.infer.echo',
        queue_group: 'cohort.q.echo',
        metadata: expect.objectContaining({ policy: 'timer', max_delay_ms: '4', ready: 'true' }),
      },
    ])
    // Go's micro client decodes metadata as map[string]string: every value must be a string.
    for (const md of [info.metadata, ...info.endpoints.map((e) => e.metadata)]) {
      for (const v of Object.values(md)) {
        expect(typeof v).toBe('string')
      }
    }
  })

  it('counts requests, errors and processing time per model in $SRV.STATS', async () => {
    const { transport, workers } = await start(['w-a'])
    const before = Date.now()
    const fresh = await one<ServiceStatsResponse>(transport, '$SRV.STATS')
    expect(fresh.endpoints.map((e) => [e.name, e.num_requests, e.num_errors, e.last_error, e.processing_time])).toEqual([
      ['double', 0, 0, '', 0],
      ['echo', 0, 0, '', 0],
    ])
    expect((await infer(transport, 'double', [{ x: 1 }, { x: 2 }, { x: 3 }])).items).toEqual([{ y: 2 }, { y: 4 }, { y: 6 }])
    expect((await infer(transport, 'double', [{ x: 5 }])).items).toEqual([{ y: 10 }])
    expect((await infer(transport, 'double', [{ x: 13 }])).errors).toEqual([{ code: 'PREDICTOR_FAILED', message: 'unlucky 13' }])
    expect((await infer(transport, 'double', [{ x: 'nope' }])).errors?.[0]?.code).toBe('INVALID_INPUT')
    // An undecodable request counts as a request and an error too.
    const bad = decodeReply(await transport.request(subj.infer('double'), new Uint8Array([1, 2, 3]), { timeoutMs: 1_000 }))
    expect(bad.error?.code).toBe('BAD_REQUEST')
    await infer(transport, 'echo', [{ s: 'a' }])

    const st = await one<ServiceStatsResponse>(transport, '$SRV.STATS')
    expect(st).toMatchObject({ type: 'io.nats.micro.v1.stats_response', name: 'cohort-worker', id: 'w-a', version: '0.1.0' })
    const started = Date.parse(st.started)
    expect(st.started).toBe(new Date(started).toISOString())
    expect(started).toBeLessThanOrEqual(before)
    const [double, echo] = st.endpoints
    expect(double).toMatchObject({
      name: 'double',
      subject: 'cohort.infer.double',
      queue_group: 'cohort.q.double',
      num_requests: 5,
      num_errors: 3,
      data: { queued: 0, running: 0, batches: 3, items: 5, mean_batch_size: 5 / 3 },
    })
    expect(double!.last_error).toMatch(/^BAD_REQUEST: /)
    expect(double!.processing_time).toBeGreaterThan(0)
    expect(Number.isInteger(double!.processing_time)).toBe(true)
    expect(double!.average_processing_time).toBe(Math.round(double!.processing_time / 5))
    expect(echo).toMatchObject({
      name: 'echo',
      num_requests: 1,
      num_errors: 0,
      last_error: '',
      data: { batches: 1, items: 1, mean_batch_size: 1 },
    })
    // The counters are the worker's own.
    expect(workers[0]!.servers[0]!.requestStats).toMatchObject({ requests: 5, answered: 5, errors: 3 })
  })

  it('reports queued and running items in STATS and in cohort_pending_requests', async () => {
    const { transport, workers, gate } = await start(['w-a'])
    const w = workers[0]!
    gate.close()
    const first = infer(transport, 'double', [{ x: 1 }, { x: 2 }])
    await vi.waitFor(() => expect(w.servers[0]!.runningItems).toBe(2), { timeout: 2_000, interval: 2 })
    const second = infer(transport, 'double', [{ x: 3 }, { x: 4 }, { x: 5 }])
    await vi.waitFor(() => expect(w.servers[0]!.engine.queued).toBe(3), { timeout: 2_000, interval: 2 })
    const st = await one<ServiceStatsResponse>(transport, '$SRV.STATS.cohort-worker.w-a')
    expect(st.endpoints[0]).toMatchObject({ name: 'double', num_requests: 2, data: { queued: 3, running: 2 } })
    const m = parsePrometheus(w.registry.render())
    expect(m.get('cohort_pending_requests{model="double"}')).toBe(5)
    expect(m.get('cohort_pending_requests{model="echo"}')).toBe(0)
    gate.open()
    await Promise.all([first, second])
    expect(parsePrometheus(w.registry.render()).get('cohort_pending_requests{model="double"}')).toBe(0)
  })

  it('answers the name- and id-qualified subjects only for its own id', async () => {
    const { transport, workers } = await start(['w-a', 'w-b'])
    expect(workers[1]!.services?.subjects()).toEqual([
      '$SRV.PING',
      '$SRV.PING.cohort-worker',
      '$SRV.PING.cohort-worker.w-b',
      '$SRV.INFO',
      '$SRV.INFO.cohort-worker',
      '$SRV.INFO.cohort-worker.w-b',
      '$SRV.STATS',
      '$SRV.STATS.cohort-worker',
      '$SRV.STATS.cohort-worker.w-b',
    ])
    for (const verb of ['PING', 'INFO', 'STATS']) {
      const got = await all<{ id: string; type: string }>(transport, `$SRV.${verb}.cohort-worker.w-b`)
      expect(got.map((g) => [g.id, g.type])).toEqual([['w-b', `io.nats.micro.v1.${verb.toLowerCase()}_response`]])
      expect((await all<{ id: string }>(transport, `$SRV.${verb}.cohort-worker`)).map((g) => g.id)).toEqual(['w-a', 'w-b'])
    }
    await expect(transport.request('$SRV.PING.cohort-worker.w-zzz', EMPTY, { timeoutMs: 100 })).rejects.toMatchObject({
      code: 'NO_WORKER',
    })
  })

  it('keeps answering while draining (state draining, endpoints not ready), then stops', async () => {
    const { transport, workers, gate } = await start(['w-a'])
    const w = workers[0]!
    gate.close()
    const held = infer(transport, 'double', [{ x: 21 }])
    await vi.waitFor(() => expect(w.servers[0]!.runningItems).toBe(1), { timeout: 2_000, interval: 2 })
    const drained = w.drain()
    const ping = await one<ServicePingResponse>(transport, '$SRV.PING.cohort-worker.w-a')
    expect(ping.metadata['state']).toBe('draining')
    const info = await one<ServiceInfoResponse>(transport, '$SRV.INFO')
    expect(info.endpoints.map((e) => e.metadata['ready'])).toEqual(['false', 'false'])
    gate.open()
    expect((await held).items).toEqual([{ y: 42 }])
    await drained
    for (const s of w.services!.subjects()) {
      expect(await transport.requestAll(s, EMPTY, { timeoutMs: 10 })).toEqual([])
    }
    await expect(transport.request('$SRV.PING', EMPTY, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'NO_WORKER' })
  })

  it('names endpoints with ADR-32-safe names and keeps the model name in metadata', async () => {
    const transport = new InProcessTransport()
    const dotted = definePredictor({ name: 'resnet.v1', input: Type.Object({ x: Type.Number() }), predict: (xs) => xs.map((x) => x.x) })
    const w = new CohortWorker({ transport, id: 'w-d', runners: [new PredictorRunner(dotted)] })
    await w.start()
    envs.push({ transport, workers: [w], gate: new Gate() })
    const info = await one<ServiceInfoResponse>(transport, '$SRV.INFO')
    expect(info.endpoints[0]).toMatchObject({
      name: 'resnet_v1',
      subject: 'cohort.infer.resnet%2Ev1', // one token (docs/protocol.md)
      queue_group: 'cohort.q.resnet%2Ev1',
      metadata: { model: 'resnet.v1' },
    })
    expect((await one<ServiceStatsResponse>(transport, '$SRV.STATS')).endpoints[0]!.name).toBe('resnet_v1')
  })

  it('skips the id-qualified subjects when the id is not one subject token', async () => {
    const { transport, workers } = await start(['host.example:1'])
    expect(workers[0]!.services?.subjects()).toHaveLength(6)
    expect((await one<ServicePingResponse>(transport, '$SRV.PING.cohort-worker')).id).toBe('host.example:1')
  })
})
