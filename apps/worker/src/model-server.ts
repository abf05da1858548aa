import {
  BATCHING_KEYS,
  BatchEngine,
  batchingToJson,
  parseBatchingPatch,
  type Batch,
  type BatchingConfig,
  type CapChange,
  type ExpireReason,
  type Offer,
  layerBatching,
  type ConfigLayer,
  type LayeredBatching,
} from '@cohort/batching'
import {
  CohortError,
  decodeCancel,
  decodeReply,
  decodeInferMessage,
  encodeAccept,
  encodeNotice,
  encodeReply,
  encodeRequest,
  encodeValue,
  isAcceptSubject,
  requestItemCount,
  toWireError,
  type InferReply,
  type InferRequest,
  type ItemTiming,
  type ModelMeta,
  type Subjects,
  type WireError,
} from '@cohort/protocol'
import type { WorkerMetrics } from '@cohort/metrics'
import { consume, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import type { TSchema } from '@sinclair/typebox'
import type { Span, Tracer } from '@opentelemetry/api'
import { consoleErrorLogger, defaultTracer, type Logger } from '@cohort/observability'
import { buildReply, checkRequestedOutputs } from './reply.ts'
import { InferStats } from './infer-stats.ts'
import { ModelTelemetry } from './tracing.ts'
import type { ItemResult, ModelRunner } from './runners/types.ts'
import { JobRunner, type WorkerJobOptions } from './jobs.ts'
import { batchTimeLimitMs, checkBatchTimeoutMs } from './batch-limit.ts'
import { runnerEvents } from './runner-events.ts'

/**
 * The replies of one pack's requests, sent together: one message per batch (protocol v2). Every
 * message but the last goes out as a publication on the pack's reply subject; the last one (every
 * request answered) as the message's answer, which gives back what the pack held of the worker's
 * in-flight bound (`bounded` subscriptions) only once the whole pack is answered.
 */
class ReplySink {
  replies: InferReply[] = []
  #scheduled = false
  #left: number
  constructor(
    readonly msg: TransportMessage,
    readonly transport: Transport,
    /** Replies the pack will get in all. */
    total: number,
  ) {
    this.#left = total
  }

  /** Publish on the pack's reply subject without answering the message (accept notices, early replies). */
  publish(bytes: Uint8Array): void {
    if (this.msg.reply) {
      this.transport.publish(this.msg.reply, bytes)
    }
  }

  push(r: InferReply): void {
    this.replies.push(r)
    if (!this.#scheduled) {
      this.#scheduled = true
      // Every item of a batch completes in one synchronous loop: their replies leave together.
      queueMicrotask(() => this.flush())
    }
  }

  flush(): void {
    this.#scheduled = false
    const replies = this.replies.splice(0)
    if (replies.length === 0) {
      return
    }
    const max = this.transport.maxMessageBytes
    const bytes = encodeNotice({ v: 2, t: 'replies', replies })
    const out: Uint8Array[] = []
    if (bytes.byteLength <= max) {
      out.push(bytes)
    } else {
      // Too big together: one message per reply, each within the bound or answered RESPONSE_TOO_LARGE.
      for (const r of replies) {
        const one = encodeNotice({ v: 2, t: 'replies', replies: [r] })
        out.push(one.byteLength <= max ? one : encodeNotice({ v: 2, t: 'replies', replies: [tooLarge(r, one.byteLength, max)] }))
      }
    }
    this.#left -= replies.length
    out.forEach((b, i) => {
      if (this.#left <= 0 && i === out.length - 1) {
        this.msg.respond(b)
      } else {
        this.publish(b)
      }
    })
  }
}

function tooLarge(r: InferReply, size: number, max: number): InferReply {
  return {
    v: 1,
    id: r.id,
    error: { code: 'RESPONSE_TOO_LARGE', message: `reply of ${size} bytes exceeds the bus limit of ${max} bytes; send fewer items per request` },
  }
}

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

interface QItem {
  p: Pending
  index: number
  payload: unknown
}

/** Options of {@link ModelServer}. */
export interface ModelServerOptions {
  runner: ModelRunner
  transport: Transport
  subjects: Subjects
  metrics: WorkerMetrics
  workerId: string
  /** Overrides of the runner's batching defaults: the command line's flags for every model. */
  batching?: Partial<BatchingConfig>
  /** This model's own flags (`--model NAME=PATH,max-batch-size=4`), over `batching`. */
  modelBatching?: Partial<BatchingConfig>
  outputSchema?: TSchema | undefined
  /**
   * Capacity-aware distribution: listen on the model's main subject only while fewer than
   * `highWater` items are queued (default 2 batches per executor slot); the overflow subject is
   * always listened to. A busy worker thus stops taking new work while another has room.
   * @default true
   */
  capacityAware?: boolean
  /** Queued items at which the worker stops listening on the main subject. @default 2 * maxBatchSize * concurrency */
  highWater?: number
  /** Follow the model's runtime configuration in the transport's config store. @default true */
  followConfig?: boolean
  /** Called with rejected runtime configuration (bad values). @default logger.error */
  onConfigError?: (e: unknown) => void
  /** Tracer of the request and batch spans. @default trace.getTracer('cohort') (no-op without an SDK) */
  tracer?: Tracer
  /** Structured logger: config changes, batch failures. @default errors to console.error */
  logger?: Logger
  /** Pull this model's async prediction jobs (JetStream) into the batch engine. Off when absent. */
  jobs?: WorkerJobOptions
  /**
   * Per-batch time limit in ms (0: none): a batch past it fails its items with BATCH_TIMEOUT and
   * the runner is replaced (docs/reliability.md#batch-time-limit).
   * @default max(10000, 20 * the learned t(b) of the batch)
   */
  batchTimeoutMs?: number
}

/** The live batching fields of {@link ModelServer.meta} (`batchingToJson` of the engine's config). */
type LiveBatching = Pick<ModelMeta, 'maxBatchSize' | 'maxDelayMs'> & Required<Pick<ModelMeta, 'policy' | 'maxQueue' | 'maxBatchCost' | 'admission'>>

/** Thrown back to the engine after a timed-out batch was answered, so its time is not learned as a cost. */
const NOT_A_SAMPLE = Symbol('not a cost sample')

const EXPIRE_CODE: Record<ExpireReason, { code: 'DEADLINE_EXCEEDED' | 'CANCELLED' | 'SHUTTING_DOWN'; msg: string }> = {
  deadline: { code: 'DEADLINE_EXCEEDED', msg: 'deadline passed while queued; the item did not run' },
  cancelled: { code: 'CANCELLED', msg: 'the client went away; the item did not run' },
  closed: { code: 'SHUTTING_DOWN', msg: 'the worker closed before the item ran' },
  doomed: { code: 'DEADLINE_EXCEEDED', msg: 'the item could not finish before its deadline, so it was not run' },
}

/** Serves one model on its NATS subjects: decode, validate, batch, run, reply per request. */
export class ModelServer {
  readonly runner: ModelRunner
  readonly engine: BatchEngine<QItem>
  readonly #o: ModelServerOptions
  readonly #labels: { model: string }
  readonly #abort = new AbortController()
  readonly #tel: ModelTelemetry
  #subs: TransportSubscription[] = []
  #inferSub: TransportSubscription | undefined
  #inferLoop: Promise<void> = Promise.resolve()
  #overflowSub: TransportSubscription | undefined
  #loops: Promise<void>[] = []
  #closing: Promise<void> | undefined
  #paused = false
  #watch: { stop(): void } | undefined
  /** The layers below the runtime override (model, flags), see `@cohort/batching` layers.ts. */
  readonly #layers: ConfigLayer[]
  #sources: LayeredBatching['sources']
  /** The runtime layer now applied (the stored config, or `configureRuntime` patches). */
  #runtime: Partial<BatchingConfig> = {}
  #jobs: JobRunner | undefined
  /** Times the worker stopped listening on the main subject because it was full. */
  pauses = 0
  /** Items in batches running now. */
  runningItems = 0
  /**
   * Request counters of the NATS services protocol (`$SRV.STATS`, see services.ts): inference
   * requests received on the main and overflow subjects, those answered with an error (request-level
   * or any failed item), those answered, the latest error and the summed receipt-to-reply time in ns.
   */
  readonly requestStats = { requests: 0, answered: 0, errors: 0, lastError: '', processingNs: 0 }
  /** Triton-style inference statistics (`$SRV.STATS` data, the gateway's `/v2/models/{m}/stats`). */
  readonly inferStats = new InferStats()

  constructor(o: ModelServerOptions) {
    this.#o = o
    this.runner = o.runner
    this.#labels = { model: o.runner.name }
    this.#tel = new ModelTelemetry(o.tracer ?? defaultTracer(), o.logger ?? consoleErrorLogger, o.runner.name, o.workerId)
    const global: Partial<BatchingConfig> = { ...o.batching }
    const limit = o.runner.batchLimit
    if (limit !== undefined && global.maxBatchSize !== undefined && global.maxBatchSize > limit.maxBatchSize) {
      // A flag for every model does not apply past one model's hard limit (a per-model flag or a
      // runtime override past it is refused instead).
      this.#tel.logger.warn(
        { model: o.runner.name, workerId: o.workerId, maxBatchSize: global.maxBatchSize, limit: limit.maxBatchSize, reason: limit.reason },
        '--max-batch-size is above this model\'s limit; the limit applies',
      )
      delete global.maxBatchSize
    }
    this.#layers = [
      { source: 'model', values: { ...o.runner.batchDefaults, ...(limit ? { maxBatchSize: Math.min(limit.maxBatchSize, o.runner.batchDefaults.maxBatchSize) } : {}) } },
      { source: 'flags', values: global },
      { source: 'flags', values: { ...o.modelBatching } },
    ]
    const layered = this.#resolve({})
    this.#sources = layered.sources
    this.engine = new BatchEngine<QItem>({
      ...layered.config,
      concurrency: o.runner.concurrency,
      run: (b) => this.#run(b),
      expire: (v, reason) => this.#expire(v, reason),
      onRunError: (e) => {
        if (e !== NOT_A_SAMPLE) {
          this.#tel.logger.error({ model: o.runner.name, err: e }, 'batch run failed')
        }
      },
      onCapChange: (c) => this.#onCapChange(c),
    })
    checkBatchTimeoutMs(o.batchTimeoutMs)
    o.runner.observe?.(runnerEvents(o.runner.name, o.workerId, o.metrics, this.#tel.logger))
  }

  /** Subscribe to the model's subjects and announce it. The runner must be started. */
  async start(): Promise<void> {
    const { transport: t, subjects: s } = this.#o
    const name = this.runner.name
    if (this.#o.followConfig ?? true) {
      this.#watch = t.config.watch(name, (cfg) => this.applyConfig(cfg))
      const current = await t.config.get(name).catch(() => undefined)
      if (current) {
        this.applyConfig(current)
      }
    }
    this.#listenMain()
    this.#overflowSub = t.subscribe(s.overflow(name), { queue: s.queue(name), bounded: true })
    const metaSub = t.subscribe(s.meta(name), { queue: s.queue(name) })
    const cancelSub = t.subscribe(s.cancel(name))
    this.#subs = [this.#overflowSub, metaSub, cancelSub]
    this.#loops = [
      this.#consume(this.#overflowSub, (m) => this.#onInfer(m)),
      this.#consume(metaSub, (m) => m.respond(encodeValue(this.meta()))),
      this.#consume(cancelSub, (m) => this.#onCancel(m)),
    ]
    if (this.runner.announce !== false) {
      await t.directory.announce(name, encodeValue(this.meta()))
    }
    if (this.#o.jobs) {
      this.#jobs = new JobRunner(this.#o.jobs, this, this.#tel.logger)
      this.#jobs.start()
    }
  }

  /** Model name (for the job runner). */
  get name(): string {
    return this.runner.name
  }

  /** Largest batch now, the self-tuned cap (for the job runner's pulls). */
  get maxBatchSize(): number {
    return this.engine.batchCap
  }

  /** Count and log a change of the self-tuned batch cap with the figures behind it. */
  #onCapChange(c: CapChange): void {
    this.#o.metrics.capChanges.inc({ ...this.#labels, reason: c.reason })
    const perItem = (rate: number) => (Number.isFinite(rate) && rate > 0 ? Math.round((1000 / rate) * 1000) / 1000 : null)
    this.#tel.logger.info(
      {
        model: this.runner.name,
        workerId: this.#o.workerId,
        from: c.from,
        to: c.to,
        reason: c.reason,
        msPerItemFrom: perItem(c.fromRate),
        msPerItemTo: perItem(c.toRate),
        budgetMs: Number.isFinite(c.budgetMs) ? c.budgetMs : null,
        limit: this.engine.config.maxBatchSize,
      },
      'batch cap changed',
    )
  }

  /** Items the engine takes before the main subject would pause (async jobs are pulled only then). */
  room(): number {
    return this.#closing ? 0 : this.#highWater() - this.engine.queued
  }

  /** Run a request through the same path as one from the bus (async jobs); resolves with its reply. */
  submit(req: InferRequest): Promise<InferReply> {
    return new Promise((resolve) => {
      this.#onInfer({
        subject: 'job',
        data: encodeRequest(req),
        respond: (bytes) => {
          resolve(decodeReply(bytes))
          return true
        },
      })
    })
  }

  /**
   * Apply a stored runtime configuration: its batching fields (`@cohort/batching`'s table, own
   * keys only; other keys are ignored). Bad values are reported, and nothing of that config applied.
   */
  applyConfig(cfg: Record<string, unknown>): void {
    const patch: Record<string, unknown> = {}
    for (const k of BATCHING_KEYS) {
      if (Object.hasOwn(cfg, k)) {
        patch[k] = cfg[k]
      }
    }
    const log = this.#tel.logger
    try {
      // The stored config is the whole runtime layer: a field absent from it falls back to the
      // flags, the model's own value or the default (DELETE /admin/models/{m}/batching).
      const runtime = parseBatchingPatch(patch)
      const layered = this.#resolve(runtime)
      this.engine.configure(layered.config)
      this.#runtime = runtime
      this.#sources = layered.sources
      log.info({ model: this.runner.name, workerId: this.#o.workerId, patch, batching: this.batchingSummary(), sources: this.#sources }, 'batching configuration changed')
    } catch (e) {
      ;(this.#o.onConfigError ?? ((err: unknown) => log.error({ model: this.runner.name, workerId: this.#o.workerId, patch, err }, 'batching configuration rejected')))(e)
    }
  }

  /** The layers with `runtime` on top, checked against the runner's hard batch limit. */
  #resolve(runtime: Partial<BatchingConfig>): LayeredBatching {
    const r = layerBatching([...this.#layers, { source: 'runtime', values: runtime }])
    const limit = this.runner.batchLimit
    if (limit !== undefined && r.config.maxBatchSize > limit.maxBatchSize) {
      throw new RangeError(
        `maxBatchSize ${r.config.maxBatchSize} (from ${r.sources.maxBatchSize}) exceeds model "${this.runner.name}"'s limit of ${limit.maxBatchSize}: ${limit.reason}`,
      )
    }
    return r
  }

  /**
   * Merge `patch` into the runtime layer in code (`CohortWorker.configure`); the stored config, when
   * it changes, replaces that layer as a whole.
   * @throws RangeError for values out of bounds or past the model's batch limit.
   */
  configureRuntime(patch: Partial<BatchingConfig>): void {
    const runtime = { ...this.#runtime }
    for (const k of BATCHING_KEYS) {
      if (patch[k] !== undefined) {
        ;(runtime as Record<string, unknown>)[k] = patch[k]
      }
    }
    const layered = this.#resolve(runtime)
    this.engine.configure(layered.config)
    this.#runtime = runtime
    this.#sources = layered.sources
  }

  /** Where each live batching value came from (`default`, `model`, `file`, `flags`, `runtime`). */
  get configSources(): LayeredBatching['sources'] {
    return this.#sources
  }

  /** The live batching settings, for log lines (`maxBatchCost` null when unlimited). */
  batchingSummary(): Record<string, unknown> {
    return { ...batchingToJson(this.engine.config), batchCap: this.engine.batchCap, concurrency: this.runner.concurrency }
  }

  /** True while the worker is not listening on the main subject (full). */
  get paused(): boolean {
    return this.#paused
  }

  #highWater(): number {
    return this.#o.highWater ?? 2 * this.engine.batchCap * this.runner.concurrency
  }

  #listenMain(): void {
    const { transport: t, subjects: s } = this.#o
    const name = this.runner.name
    const sub = t.subscribe(s.infer(name), { queue: s.queue(name), bounded: true })
    this.#inferSub = sub
    this.#inferLoop = this.#consume(sub, (m) => this.#onInfer(m))
  }

  /** Stop or resume listening on the main subject according to the queue depth. */
  #regulate(): void {
    if (this.#closing || !(this.#o.capacityAware ?? true)) {
      return
    }
    const q = this.engine.queued
    const high = this.#highWater()
    if (!this.#paused && q >= high) {
      this.#paused = true
      this.pauses++
      void this.#inferSub?.drain().catch(() => undefined)
    } else if (this.#paused && q <= Math.floor(high / 2)) {
      this.#paused = false
      this.#listenMain()
    }
  }

  /** Model metadata with the live batching config. */
  meta() {
    const m = this.runner.meta()
    const c = this.engine.config
    const cm = this.engine.costModel
    return {
      ...(cm.samples > 0 ? { cost: { a: cm.a, c: cm.c, samples: cm.samples } } : {}),
      ...m,
      ...(batchingToJson(c) as LiveBatching),
      ...batchCapMeta(this.engine),
      configSources: { ...this.#sources },
      ...(this.runner.batchLimit ? { batchLimit: this.runner.batchLimit } : {}),
      queued: this.engine.queued,
    }
  }

  /** Stop taking requests, finish every one already received, then release the model. */
  drain(): Promise<void> {
    this.#closing ??= (async () => {
      this.#watch?.stop()
      await this.#jobs?.close()
      await Promise.all([this.#inferSub?.drain(), this.#overflowSub?.drain()].map((p) => p?.catch(() => undefined)))
      await this.#inferLoop
      await this.#loops[0]
      await this.engine.idle()
      for (const s of [...this.#subs, this.#inferSub]) {
        s?.unsubscribe()
      }
      this.engine.close()
      this.#abort.abort()
      await this.runner.close()
    })()
    return this.#closing
  }

  #consume(sub: TransportSubscription, fn: (m: TransportMessage) => unknown): Promise<void> {
    // Never let one bad message, or a subscription that fails (permissions), end the worker.
    return consume(sub, fn, (e, m) => {
      if (m) {
        m.respond(encodeReply({ v: 1, id: '', error: toWireError(e) }))
      } else {
        console.error(`cohort: subscription for model "${this.runner.name}" ended: ${e instanceof Error ? e.message : String(e)}`)
      }
    })
  }

  #onInfer(m: TransportMessage): void {
    const t0 = performance.now()
    let msg: ReturnType<typeof decodeInferMessage>
    try {
      msg = decodeInferMessage(m.data)
    } catch (e) {
      this.requestStats.requests++
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
      this.requestStats.requests += msg.reqs.length
      this.#tel.logger.error({ model: this.runner.name, workerId: this.#o.workerId, reply: m.reply ?? null }, `pack dropped: its reply subject is not under ${inboxes}`)
      return
    }
    const sink = new ReplySink(m, this.#o.transport, msg.reqs.length)
    const ids: string[] = []
    for (const r of msg.reqs) {
      if ('error' in r) {
        this.requestStats.requests++
        this.#respond(m, { v: 1, id: r.id, error: toWireError(r.error, 'BAD_REQUEST') }, t0, undefined, sink)
      } else {
        ids.push(r.id)
        this.#onRequest(m, r, t0, sink)
      }
    }
    // One acceptance notice for the pack (before any reply: replies leave in a later microtask).
    sink.publish(encodeNotice({ v: 2, t: 'accept', worker: this.#o.workerId, ids, queued: this.engine.queued }))
  }

  #onRequest(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined): void {
    this.requestStats.requests++
    if (req.ack !== undefined && !isAcceptSubject(this.#o.subjects.accept, req.ack)) {
      // No confused deputy: publish acceptance notices only under <prefix>.accept. (docs/security.md).
      const error = { code: 'BAD_REQUEST' as const, message: `ack subject ${JSON.stringify(String(req.ack).slice(0, 200))} is not an acceptance subject (${this.#o.subjects.accept('<gateway>')}); nothing was published there` }
      this.#respond(m, { v: 1, id: req.id, error }, t0, undefined, sink)
      return
    }
    if (req.ack) {
      // Tell the gateway at once which worker holds the request (it fails or retries the request
      // when this worker's heartbeats stop; see docs/architecture.md#worker-loss).
      this.#o.transport.publish(req.ack, encodeAccept({ v: 1, id: req.id, worker: this.#o.workerId }))
    }
    const span = this.#tel.startRequest(req)
    let items
    try {
      requestItemCount(req)
      checkRequestedOutputs(req, this.#knownOutputs(), this.runner.name)
      items = this.runner.prepare(req)
    } catch (e) {
      this.#tel.endRequest(span, this.#respond(m, { v: 1, id: req.id, error: toWireError(e, 'BAD_REQUEST') }, t0, undefined, sink), 0)
      this.#o.metrics.items.inc({ ...this.#labels, code: e instanceof CohortError ? e.code : 'BAD_REQUEST' })
      return
    }
    const p: Pending = {
      req,
      msg: m,
      sink,
      results: new Array(items.length),
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
    items.forEach((it, index) => {
      if (it.error) {
        this.#complete(p, index, { error: it.error })
      } else if (req.deadline <= now) {
        this.#complete(p, index, { error: { code: 'DEADLINE_EXCEEDED', message: 'deadline passed before the item was queued' } })
      } else {
        const offer = this.engine.offer({
          value: { p, index, payload: it.payload },
          deadline: req.deadline,
          group: it.group,
          priority: req.priority ?? 0,
          ...(it.cost !== undefined ? { cost: it.cost } : {}),
        })
        if (offer.status !== 'queued') {
          this.#o.metrics.shed.inc({ ...this.#labels, reason: offer.status === 'late' ? 'admission' : 'overloaded' })
          this.#complete(p, index, { error: refusal(this.runner.name, offer, this.engine.config.maxQueue, req.deadline - now) })
        }
      }
    })
    this.#o.metrics.queueDepth.set(this.#labels, this.engine.queued)
    this.#regulate()
  }

  #onCancel(m: TransportMessage): void {
    const { id } = decodeCancel(m.data)
    this.engine.cancel((v) => v.p.req.id === id)
  }

  async #run(batch: Batch<QItem>): Promise<void> {
    this.#regulate()
    const span = this.#tel.startBatch(batch.items, batch.reason, batch.queuedMs)
    let failure: { err: unknown; code: string; message: string } | undefined
    const t0 = performance.now()
    this.runningItems += batch.items.length
    let results: ItemResult[]
    try {
      results = await this.runner.runBatch(
        batch.items.map((i) => i.payload),
        this.#abort.signal,
        { timeoutMs: batchTimeLimitMs(this.#o.batchTimeoutMs, this.engine.costModel.upper(batch.cost ?? batch.items.length)) },
      )
    } catch (e) {
      const err = toWireError(e, 'PREDICTOR_FAILED')
      failure = { err: e, code: err.code, message: err.message }
      results = batch.items.map(() => ({ error: err }))
    }
    this.runningItems -= batch.items.length
    const computeMs = performance.now() - t0
    this.#tel.endBatch(span, batch.items, computeMs, batch.reason, failure)
    const mx = this.#o.metrics
    mx.compute.observe(this.#labels, computeMs / 1000)
    mx.batchSize.observe(this.#labels, batch.items.length)
    this.inferStats.batch(batch.items.length, computeMs)
    mx.dispatch.inc({ ...this.#labels, reason: batch.reason })
    mx.queueDepth.set(this.#labels, this.engine.queued)
    this.#regulate()
    batch.items.forEach((it, k) => {
      const queueMs = batch.queuedMs[k] ?? 0
      mx.queue.observe(this.#labels, queueMs / 1000)
      it.p.timing[it.index] = { queueMs, computeMs, batchSize: batch.items.length }
      this.#complete(it.p, it.index, results[k] ?? { error: { code: 'INTERNAL', message: 'missing result' } })
    })
    if (failure?.code === 'BATCH_TIMEOUT') {
      throw NOT_A_SAMPLE
    }
  }

  #expire(v: QItem, reason: ExpireReason): void {
    this.#o.metrics.shed.inc({ ...this.#labels, reason })
    const e = EXPIRE_CODE[reason]
    this.#complete(v.p, v.index, { error: { code: e.code, message: e.msg } })
  }

  #complete(p: Pending, index: number, r: ItemResult): void {
    if (p.results[index] !== undefined) {
      return
    }
    p.results[index] = r
    this.#o.metrics.items.inc({ ...this.#labels, code: 'error' in r ? r.error.code : 'OK' })
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
    this.#tel.endRequest(p.span, this.#respond(p.msg, reply, p.t0, p.timing, p.sink), p.results.length)
  }

  /** Send a reply (RESPONSE_TOO_LARGE instead when it exceeds the bus limit); returns what was sent. */
  #respond(m: TransportMessage, reply: InferReply, t0?: number, timing?: ItemTiming[], sink?: ReplySink): InferReply {
    if (sink) {
      // The pack's reply message is checked against the bus limit as a whole (ReplySink.flush).
      this.#account(reply, t0)
      this.inferStats.request(reply, t0 === undefined ? 0 : performance.now() - t0, timing)
      sink.push(reply)
      return reply
    }
    let bytes = encodeReply(reply)
    const max = this.#o.transport.maxMessageBytes
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
    this.#account(reply, t0)
    this.inferStats.request(reply, t0 === undefined ? 0 : performance.now() - t0, timing)
    m.respond(bytes)
    return reply
  }

  /** Count a reply in {@link requestStats}. */
  #account(reply: InferReply, t0: number | undefined): void {
    const st = this.requestStats
    if (t0 !== undefined) {
      st.answered++
      st.processingNs += Math.round((performance.now() - t0) * 1e6)
    }
    const err = reply.error ?? reply.errors?.find((e) => e)
    if (err) {
      st.errors++
      st.lastError = `${err.code}: ${err.message}`
    }
  }

  #knownOutputs(): string[] | undefined {
    const m = this.runner.meta()
    if (m.kind === 'predictor' && !m.outputSchema) {
      return undefined
    }
    return m.outputs.map((o) => o.name)
  }
}

/**
 * The self-tuned cap for model metadata (the dashboard and `/v2/models/{m}` show it):
 * `batchCap` (the cap in force), and under `autoBatchSize` `batchTuning` (changes by reason, the
 * latest change, the per-size curve measured, the latency budget).
 */
function batchCapMeta<T>(engine: BatchEngine<T>): Record<string, unknown> {
  const t = engine.tuner
  if (!t) {
    return { batchCap: engine.batchCap, autoBatchSize: false }
  }
  const last = t.last
  return {
    batchCap: engine.batchCap,
    autoBatchSize: true,
    batchTuning: {
      ...t.toJSON(),
      last: last
        ? { from: last.from, to: last.to, reason: last.reason, at: last.at, budgetMs: Number.isFinite(last.budgetMs) ? last.budgetMs : null }
        : null,
    },
  }
}

/** The answer to an item the engine would not queue: 503 OVERLOADED (or SHUTTING_DOWN after close). */
function refusal(model: string, offer: Offer, maxQueue: number, leftMs: number): WireError {
  switch (offer.status) {
    case 'late':
      if (offer.infeasible) {
        return {
          code: 'DEADLINE_EXCEEDED',
          message: `model "${model}" cannot finish this item within its deadline even alone (estimated ${Math.round(offer.estimatedFinishMs ?? 0)} ms, ${Math.round(leftMs)} ms left); it was not run`,
        }
      }
      return {
        code: 'OVERLOADED',
        message: `model "${model}" cannot finish this item within its deadline (estimated ${Math.round(offer.estimatedFinishMs ?? 0)} ms behind the queued work, ${Math.round(leftMs)} ms left)`,
        retryAfterS: Math.max(1, Math.ceil(offer.retryAfterMs / 1000)),
      }
    case 'full':
      return {
        code: 'OVERLOADED',
        message: `model "${model}" queue is full (${maxQueue} items)`,
        retryAfterS: Math.max(1, Math.ceil(offer.retryAfterMs / 1000)),
      }
    default:
      return { code: 'SHUTTING_DOWN', message: `model "${model}" is shutting down` }
  }
}
