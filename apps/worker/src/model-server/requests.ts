import type { Batch, BatchEngine, ExpireReason, Offer } from '@cohort/batching'
import {
  CohortError,
  decodeCancel,
  decodeInferMessage,
  encodeAccept,
  encodeReply,
  inferMessageFrom,
  isAcceptSubject,
  msgpackSizeBound,
  requestItemCount,
  toWireError,
  type InferReply,
  type InferRequest,
  type Generator as ModelGenerator,
  type ItemTiming,
  type Subjects,
  type WireError,
} from '@cohort/protocol'
import type { Transport, TransportMessage } from '@cohort/transport'
import type { TSchema } from '@sinclair/typebox'
import type { Span } from '@opentelemetry/api'
import { buildReply, checkRequestedOutputs } from '../reply.ts'
import type { ModelTelemetry } from '../tracing.ts'
import type { ItemResult, ModelRunner } from '../runners/types.ts'
import { batchTimeLimitMs } from '../batch-limit.ts'
import { ReplySink } from './reply-sink.ts'
import { wireWait } from './wait.ts'
import { Generations } from './generations.ts'
import type { ServerStats } from './stats.ts'
import type { StallWatch } from './stall.ts'

interface Pending {
  req: InferRequest
  msg: TransportMessage
  /** Set for a request that came in a pack: its reply joins the pack's next reply message. */
  sink: ReplySink | undefined
  results: (ItemResult | undefined)[]
  timing: ItemTiming[]
  remaining: number
  /** performance.now() at receipt (for the services protocol's processing_time). */
  t0: number
  /** The `cohort.worker.request` span (queue + compute), ended with the reply. */
  span: Span
}

/** A request's items as its runner prepared them. */
type PreparedItems = ReturnType<ModelRunner['prepare']>

/** One queued item of a request: what the batch engine holds. */
export interface QItem {
  p: Pending
  index: number
  payload: unknown
}

/** Thrown back to the engine after a timed-out batch was answered, so its time is not learned as a cost. */
export const NOT_A_SAMPLE = new Error('not a cost sample (a timed-out batch, already answered)')

const EXPIRE_CODE: Record<ExpireReason, { code: 'DEADLINE_EXCEEDED' | 'CANCELLED' | 'SHUTTING_DOWN'; msg: string }> = {
  deadline: { code: 'DEADLINE_EXCEEDED', msg: 'deadline passed while queued; the item did not run' },
  cancelled: { code: 'CANCELLED', msg: 'the client went away; the item did not run' },
  closed: { code: 'SHUTTING_DOWN', msg: 'the worker closed before the item ran' },
  doomed: { code: 'DEADLINE_EXCEEDED', msg: 'the item could not finish before its deadline, so it was not run' },
}

/** Options of {@link Requests}. */
export interface RequestsOptions {
  runner: ModelRunner
  transport: Transport
  subjects: Subjects
  workerId: string
  outputSchema?: TSchema | undefined
  /** See ModelServerOptions.batchTimeoutMs. */
  batchTimeoutMs?: number | undefined
  engine: BatchEngine<QItem>
  tel: ModelTelemetry
  stats: ServerStats
  /** Aborted when the server closes (passed to the runner's batches). */
  signal: AbortSignal
  /** Called whenever the queue depth may have changed (capacity regulation). */
  regulate: () => void
  /** The repository version served (ModelServerOptions.version); undefined: "1". */
  version?: string | undefined
  /** Told of every batch's start and end (hung-batch readiness, `stall.ts`). */
  stall?: StallWatch | undefined
  /** A generative model's generator (started): requests with `generate` go to it (`generations.ts`). */
  generator?: (() => ModelGenerator) | undefined
  /** See ModelServerOptions.generationProbeMs. */
  generationProbeMs?: number | undefined
}

/**
 * Request assembly: decode messages (single requests and v2 packs), validate and split requests
 * into items for the batch engine, run batches, and put each request's reply together and send it.
 */
export class Requests {
  readonly #o: RequestsOptions
  /** Items in batches running now. */
  runningItems = 0
  /** The generations of a generative model (absent for other models). */
  readonly generations: Generations | undefined

  constructor(o: RequestsOptions) {
    this.#o = o
    const g = o.generator
    this.generations = g
      ? new Generations({
          name: o.runner.name,
          generator: g,
          workerId: o.workerId,
          tel: o.tel,
          stats: o.stats,
          transport: o.transport,
          probeMs: o.generationProbeMs,
          respond: (m, reply, t0, sink) => this.#respond(m, reply, t0, undefined, sink),
        })
      : undefined
  }

  get #name(): string {
    return this.#o.runner.name
  }

  onInfer(m: TransportMessage): void {
    const t0 = performance.now()
    let msg: ReturnType<typeof decodeInferMessage>
    try {
      // Carried as a value (in-process): checked as a decode checks it, without the decode.
      msg = m.value !== undefined ? inferMessageFrom(m.value) : decodeInferMessage(m.data)
    } catch (e) {
      this.#o.stats.received()
      this.#respond(m, { v: 1, id: '', error: toWireError(e, 'BAD_REQUEST') }, t0)
      return
    }
    if (msg.v === 1) {
      this.#onRequest(m, msg.req, t0, undefined)
      return
    }
    // A pack (protocol v2): answers go to its reply subject, which must be a gateway inbox.
    const inboxes = this.#o.subjects.inbox('')
    if (!m.reply?.startsWith(inboxes)) {
      this.#o.stats.received(msg.reqs.length)
      this.#o.tel.logger.error({ model: this.#name, workerId: this.#o.workerId, reply: m.reply ?? null }, `pack dropped: its reply subject is not under ${inboxes}`)
      return
    }
    const sink = new ReplySink(m, this.#o.transport, msg.reqs.length)
    const ids: string[] = []
    for (const r of msg.reqs) {
      if ('error' in r) {
        this.#o.stats.received()
        this.#respond(m, { v: 1, id: r.id, error: toWireError(r.error, 'BAD_REQUEST') }, t0, undefined, sink)
      } else {
        ids.push(r.id)
        this.#onRequest(m, r, t0, sink)
      }
    }
    // One acceptance notice for the pack (before any reply: replies leave in a later microtask),
    // with the queue-wait estimate for the gateway's door (docs/batching.md#admission-at-the-door).
    const wait = wireWait(this.#o.engine, tenantsOf(msg.reqs))
    sink.notice({
      v: 2,
      t: 'accept',
      worker: this.#o.workerId,
      ids,
      queued: this.#o.engine.queued,
      ...(wait
        ? {
            waitMs: wait.waitMs,
            serviceMs: wait.serviceMs,
            ...(wait.itemMs !== undefined ? { itemMs: wait.itemMs } : {}),
            ...(wait.aloneMs !== undefined ? { aloneMs: wait.aloneMs } : {}),
            ...(wait.tenants ? { tenants: wait.tenants } : {}),
          }
        : {}),
    })
  }

  onCancel(m: TransportMessage): void {
    const { id } = decodeCancel(m.data)
    if (this.generations?.cancel(id)) {
      return
    }
    this.#o.engine.cancel((v) => v.p.req.id === id)
  }

  /** The engine's `run`: run one batch and answer its items. */
  async run(batch: Batch<QItem>): Promise<void> {
    const { engine, tel, stats, runner } = this.#o
    this.#o.regulate()
    const span = tel.startBatch(batch.items, batch.reason, batch.queuedMs)
    let failure: { err: unknown; code: string; message: string } | undefined
    const t0 = performance.now()
    this.runningItems += batch.items.length
    const upper = engine.costModel.samples > 0 ? engine.costModel.upper(batch.cost ?? batch.items.length) : 0
    const ended = this.#o.stall?.begin(
      batch.items.reduce((d, i) => Math.max(d, i.p.req.deadline), 0),
      upper,
    )
    let results: ItemResult[]
    const measured: { computeMs?: number } = {}
    try {
      results = await runner.runBatch(
        batch.items.map((i) => i.payload),
        this.#o.signal,
        {
          timeoutMs: batchTimeLimitMs(this.#o.batchTimeoutMs, engine.costModel.upper(batch.cost ?? batch.items.length)),
          // Items still queued and the other batches running (this one is counted in `running`).
          behind: engine.queued + engine.running - 1,
          measured,
        },
      )
      if (measured.computeMs !== undefined) {
        batch.serviceMs = measured.computeMs
      }
    } catch (e) {
      const err = toWireError(e, 'PREDICTOR_FAILED')
      failure = { err: e, code: err.code, message: err.message }
      results = batch.items.map(() => ({ error: err }))
    }
    this.runningItems -= batch.items.length
    ended?.()
    const computeMs = performance.now() - t0
    tel.endBatch(span, batch.items, computeMs, batch.reason, failure)
    stats.batch(batch.items.length, computeMs, batch.reason)
    stats.queueDepth(engine.queued, engine.backlogMs)
    this.#o.regulate()
    batch.items.forEach((it, k) => {
      const queueMs = batch.queuedMs[k] ?? 0
      stats.queueWait(queueMs, it.p.req.tenant)
      it.p.timing[it.index] = { queueMs, computeMs, batchSize: batch.items.length }
      this.#complete(it.p, it.index, results[k] ?? { error: { code: 'INTERNAL', message: 'missing result' } })
    })
    if (failure?.code === 'BATCH_TIMEOUT') {
      throw NOT_A_SAMPLE
    }
  }

  /** The engine's `expire`: answer an item that will not run. */
  expire(v: QItem, reason: ExpireReason): void {
    this.#o.stats.shed(reason)
    const e = EXPIRE_CODE[reason]
    this.#complete(v.p, v.index, { error: { code: e.code, message: e.msg } })
  }

  /**
   * One request (alone or from a pack), in named steps: {@link #refuseRoute} (ack subject, version),
   * the acceptance notice, a generation to {@link #onGenerate}, {@link #prepare} (bounds, outputs,
   * items), then all or nothing for the queue ({@link #refuseWhole}) and {@link #enqueue}.
   */
  #onRequest(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined): void {
    this.#o.stats.received()
    if (this.#refuseRoute(m, req, t0, sink)) {
      return
    }
    if (req.ack) {
      // Tell the gateway at once which worker holds the request (it fails or retries the request
      // when this worker's heartbeats stop; see docs/architecture.md#worker-loss).
      this.#o.transport.publish(req.ack, encodeAccept({ v: 1, id: req.id, worker: this.#o.workerId }))
    }
    if (req.generate !== undefined) {
      this.#onGenerate(m, req, t0, sink)
      return
    }
    const span = this.#o.tel.startRequest(req)
    const items = this.#prepare(m, req, t0, sink, span)
    if (!items) {
      return
    }
    const p: Pending = {
      req,
      msg: m,
      sink,
      results: new Array<ItemResult | undefined>(items.length),
      timing: Array.from({ length: items.length }, () => ({ queueMs: 0, computeMs: 0, batchSize: 0 })),
      remaining: items.length,
      t0,
      span,
    }
    if (items.length === 0) {
      this.#finish(p)
      return
    }
    const now = Date.now()
    if (this.#refuseWhole(p, items, now)) {
      return
    }
    this.#enqueue(p, items, now)
    this.#o.stats.queueDepth(this.#o.engine.queued, this.#o.engine.backlogMs)
    this.#o.regulate()
  }

  /** Step 1: answer (and true) a request this worker must not take: a foreign ack subject, another version. */
  #refuseRoute(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined): boolean {
    const { subjects } = this.#o
    if (req.ack !== undefined && !isAcceptSubject(subjects.accept, req.ack)) {
      // No confused deputy: publish acceptance notices only under <prefix>.accept. (docs/security.md).
      const error = {
        code: 'BAD_REQUEST' as const,
        message: `ack subject ${JSON.stringify(req.ack.slice(0, 200))} is not an acceptance subject (${subjects.accept('<gateway>')}); nothing was published there`,
      }
      this.#respond(m, { v: 1, id: req.id, error }, t0, undefined, sink)
      return true
    }
    const own = this.#o.version ?? '1'
    if (req.version !== undefined && req.version !== own) {
      const error = { code: 'MODEL_NOT_FOUND' as const, message: `model "${this.#name}" has no version "${req.version}" on this worker (it serves version ${own})` }
      this.#respond(m, { v: 1, id: req.id, error }, t0, undefined, sink)
      return true
    }
    return false
  }

  /** A `generate` request: to the generations, or 400 when the model is not generative. */
  #onGenerate(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined): void {
    if (this.generations) {
      this.generations.submit(m, req, t0, sink)
      return
    }
    const kind = this.#o.runner.meta().kind
    const error = {
      code: 'BAD_REQUEST' as const,
      message: `model "${this.#name}" is not generative (kind ${kind}): generate requests need a generative model; send POST /v2/models/${this.#name}/infer`,
    }
    this.#o.stats.item(error.code)
    this.#respond(m, { v: 1, id: req.id, error }, t0, undefined, sink)
  }

  /**
   * Step 2: the request's items, after the checks that refuse it whole (more rows than the queue
   * bounds: 413 TOO_MANY_ITEMS; unknown requested outputs; the runner's own validation); on a
   * refusal it is answered, the span ended, and `undefined` returned.
   */
  #prepare(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined, span: Span): PreparedItems | undefined {
    try {
      const rows = requestItemCount(req)
      const { maxQueue, maxTenantQueue } = this.#o.engine.config
      if (rows > maxQueue) {
        throw new CohortError(
          'TOO_MANY_ITEMS',
          `request holds ${rows} items (rows); model "${this.#name}" queues at most ${maxQueue} (maxQueue): split it into requests of at most ${maxQueue}`,
        )
      }
      if (maxTenantQueue > 0 && rows > maxTenantQueue) {
        throw new CohortError(
          'TOO_MANY_ITEMS',
          `request holds ${rows} items (rows); model "${this.#name}" queues at most ${maxTenantQueue} per tenant (maxTenantQueue): split it into requests of at most ${maxTenantQueue}`,
        )
      }
      checkRequestedOutputs(req, this.#knownOutputs(), this.#name)
      return this.#o.runner.prepare(req)
    } catch (e) {
      this.#o.tel.endRequest(span, this.#respond(m, { v: 1, id: req.id, error: toWireError(e, 'BAD_REQUEST') }, t0, undefined, sink), 0)
      this.#o.stats.item(e instanceof CohortError ? e.code : 'BAD_REQUEST')
      return undefined
    }
  }

  /**
   * Step 3, all or nothing for the queue bound: a request that fits the bound but not the room left
   * now is refused whole (503, retryable), never half run. True when it was.
   */
  #refuseWhole(p: Pending, items: PreparedItems, now: number): boolean {
    const { engine, stats } = this.#o
    const req = p.req
    const queueable = items.reduce((n, it) => (it.error ? n : n + 1), 0)
    const { maxQueue, maxTenantQueue } = engine.config
    const room = maxQueue - engine.queued
    const tenantRoom = maxTenantQueue > 0 ? maxTenantQueue - engine.queuedOf(req.tenant ?? '') : Infinity
    if (queueable > 1 && queueable > Math.min(room, tenantRoom) && !engine.closed) {
      const offer: Offer = { status: 'full', retryAfterMs: engine.backlogMs, ...(tenantRoom < room ? { tenant: true } : {}) }
      const error = refusal(this.#name, offer, offer.tenant ? maxTenantQueue : maxQueue, req.deadline - now, queueable)
      stats.shed('overloaded', queueable)
      items.forEach((it, index) => this.#complete(p, index, it.error ? { error: it.error } : { error }))
      return true
    }
    return false
  }

  /** Step 4: offer each item to the batch engine; an item refused there (or already late) is answered alone. */
  #enqueue(p: Pending, items: PreparedItems, now: number): void {
    const { engine, stats } = this.#o
    const req = p.req
    items.forEach((it, index) => {
      if (it.error) {
        this.#complete(p, index, { error: it.error })
      } else if (req.deadline <= now) {
        this.#complete(p, index, { error: { code: 'DEADLINE_EXCEEDED', message: 'deadline passed before the item was queued' } })
      } else {
        const offer = engine.offer({
          value: { p, index, payload: it.payload },
          deadline: req.deadline,
          group: it.group,
          priority: req.priority ?? 0,
          ...(req.tenant !== undefined ? { tenant: req.tenant } : {}),
          ...(it.cost !== undefined ? { cost: it.cost } : {}),
        })
        if (offer.status !== 'queued') {
          stats.shed(offer.status === 'late' ? 'admission' : 'overloaded')
          const bound = offer.status === 'full' && offer.tenant ? engine.config.maxTenantQueue : engine.config.maxQueue
          this.#complete(p, index, { error: refusal(this.#name, offer, bound, req.deadline - now) })
        }
      }
    })
  }

  #complete(p: Pending, index: number, r: ItemResult): void {
    if (p.results[index] !== undefined) {
      return
    }
    p.results[index] = r
    this.#o.stats.item('error' in r ? r.error.code : 'OK', p.req.tenant)
    if (--p.remaining === 0) {
      this.#finish(p)
    }
  }

  #finish(p: Pending): void {
    let reply: InferReply
    try {
      reply = buildReply(p.req, p.results as ItemResult[], p.timing, this.#o.workerId, this.#o.outputSchema)
    } catch (e) {
      reply = { v: 1, id: p.req.id, error: toWireError(e) }
    }
    this.#o.tel.endRequest(p.span, this.#respond(p.msg, reply, p.t0, p.timing, p.sink), p.results.length)
  }

  /** Send a reply (RESPONSE_TOO_LARGE instead when it exceeds the bus limit); returns what was sent. */
  #respond(m: TransportMessage, reply: InferReply, t0?: number, timing?: ItemTiming[], sink?: ReplySink): InferReply {
    if (this.#o.version !== undefined && reply.version === undefined) {
      reply = { ...reply, version: this.#o.version }
    }
    if (sink) {
      // The pack's reply message is checked against the bus limit as a whole (ReplySink.flush).
      this.#o.stats.replied(reply, t0, timing)
      sink.push(reply)
      return reply
    }
    const max = this.#o.transport.maxMessageBytes
    if (m.respondValue && msgpackSizeBound(reply) <= max) {
      // In this process and surely within the bus bound: the reply itself, not encoded.
      const r = reply
      this.#o.stats.replied(r, t0, timing)
      m.respondValue({ value: r, encode: () => encodeReply(r) })
      return r
    }
    let bytes = encodeReply(reply)
    if (bytes.byteLength > max) {
      reply = {
        v: 1,
        id: reply.id,
        error: {
          code: 'RESPONSE_TOO_LARGE',
          message: `reply of ${bytes.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${max} bytes; send fewer items per request`,
        },
      }
      bytes = encodeReply(reply)
    }
    this.#o.stats.replied(reply, t0, timing)
    m.respond(bytes)
    return reply
  }

  #knownOutputs(): string[] | undefined {
    const m = this.#o.runner.meta()
    if (m.kind === 'predictor' && !m.outputSchema) {
      return undefined
    }
    return m.outputs.map((o) => o.name)
  }
}

/** The tenants of a pack's requests ('' for the anonymous one), first seen first. */
function* tenantsOf(reqs: readonly ({ tenant?: string } | { error: unknown })[]): Generator<string> {
  for (const r of reqs) {
    if (!('error' in r)) {
      yield r.tenant ?? ''
    }
  }
}

/** The answer to an item the engine would not queue: 503 OVERLOADED, 504 DEADLINE_EXCEEDED when it cannot finish even alone (or SHUTTING_DOWN after close). */
function refusal(model: string, offer: Offer, maxQueue: number, leftMs: number, items = 1): WireError {
  switch (offer.status) {
    case 'late':
      if (offer.infeasible) {
        // 504, not 400 DEADLINE_TOO_SHORT: the worker sees only what is left of the deadline, not
        // whether the client sent it short or it was spent waiting on the way (overload). The
        // gateway's door, which knows the whole budget, answers the too-short ones (wait-check.ts).
        return {
          code: 'DEADLINE_EXCEEDED',
          message: `model "${model}" cannot finish this item within its deadline even alone (estimated ${Math.ceil(offer.aloneMs ?? offer.estimatedFinishMs ?? 0)} ms, ${Math.round(leftMs)} ms left); it was not run`,
        }
      }
      return {
        code: 'OVERLOADED',
        message: `model "${model}" cannot finish this item within its deadline (estimated ${Math.round(offer.estimatedFinishMs ?? 0)} ms behind the queued work, ${Math.round(leftMs)} ms left)`,
        retryAfterS: Math.max(1, Math.ceil(offer.retryAfterMs / 1000)),
      }
    case 'full': {
      const bound = offer.tenant ? 'maxTenantQueue' : 'maxQueue'
      const whose = offer.tenant ? "this tenant's queue" : 'queue'
      return {
        code: 'OVERLOADED',
        message:
          items > 1
            ? `model "${model}" ${whose} has no room for this request's ${items} items now (${bound} ${maxQueue}); retry later`
            : `model "${model}" ${whose} is full (${maxQueue} items, ${bound}); retry later`,
        retryAfterS: Math.max(1, Math.ceil(offer.retryAfterMs / 1000)),
      }
    }
    default:
      return { code: 'SHUTTING_DOWN', message: `model "${model}" is shutting down` }
  }
}
