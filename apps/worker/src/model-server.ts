import { BatchEngine, type BatchingConfig, type LayeredBatching } from '@cohort/batching'
import { decodeReply, encodeRequest, encodeValue, replyFrom, type InferReply, type InferRequest, type Subjects } from '@cohort/protocol'
import type { WorkerMetrics } from '@cohort/metrics'
import type { Transport, TransportMessage } from '@cohort/transport'
import type { TSchema } from '@sinclair/typebox'
import type { Tracer } from '@opentelemetry/api'
import { consoleErrorLogger, defaultTracer, type Logger } from '@cohort/observability'
import type { InferStats } from './infer-stats.ts'
import { ModelTelemetry } from './tracing.ts'
import type { ModelRunner } from './runners/types.ts'
import { GenerativeRunner } from './runners/generative-runner.ts'
import { JobRunner, type WorkerJobOptions } from './jobs.ts'
import { checkBatchTimeoutMs } from './batch-limit.ts'
import { runnerEvents } from './runner-events.ts'
import { BatchingLayers, batchingSummary } from './model-server/config.ts'
import { Listening } from './model-server/listening.ts'
import { serverMeta } from './model-server/meta.ts'
import { NOT_A_SAMPLE, Requests, type QItem } from './model-server/requests.ts'
import { ServerStats, type RequestStats } from './model-server/stats.ts'
import { StallWatch } from './model-server/stall.ts'

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
  /** The model repository's `config.json` batching (the `file` layer, under every flag). */
  fileBatching?: Partial<BatchingConfig>
  /**
   * The repository version this server serves (docs/repository.md): its subjects (`subjects`) are
   * then the version's, its metadata and replies name it, and a request for another version is
   * MODEL_NOT_FOUND. Absent: the model's only version, "1".
   */
  version?: string
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
  /**
   * Weights of tenants' fair shares of batch slots (`InferRequest.tenant` -> weight > 0); tenants
   * not named weigh 1. See docs/batching.md#fair-shares-between-tenants.
   */
  tenantWeights?: Readonly<Record<string, number>>
  /**
   * Generative models: the slow fallback of gone-gateway detection, ms (`GenerationsOptions.probeMs`;
   * streamed generations are watched at every step). @default 1000
   */
  generationProbeMs?: number
}

/**
 * Serves one model on its NATS subjects: decode, validate, batch, run, reply per request. A
 * composition of the model's subscriptions and capacity regulation (`model-server/listening.ts`),
 * request assembly and replies (`model-server/requests.ts`), its stats (`model-server/stats.ts`)
 * and config following (`model-server/config.ts`).
 */
export class ModelServer {
  readonly runner: ModelRunner
  readonly engine: BatchEngine<QItem>
  readonly #o: ModelServerOptions
  readonly #abort = new AbortController()
  readonly #tel: ModelTelemetry
  readonly #stats: ServerStats
  readonly #config: BatchingLayers
  readonly #requests: Requests
  readonly #listening: Listening
  /** Batches running past their items' deadlines (readiness of a hung model). */
  readonly #stall = new StallWatch()
  #closing: Promise<void> | undefined
  #watch: { stop(): void } | undefined
  #jobs: JobRunner | undefined

  constructor(o: ModelServerOptions) {
    this.#o = o
    this.runner = o.runner
    this.#tel = new ModelTelemetry(o.tracer ?? defaultTracer(), o.logger ?? consoleErrorLogger, o.runner.name, o.workerId)
    this.#stats = new ServerStats(o.metrics, o.runner.name)
    this.#config = new BatchingLayers({
      runner: o.runner,
      workerId: o.workerId,
      logger: this.#tel.logger,
      batching: o.batching,
      modelBatching: o.modelBatching,
      fileBatching: o.fileBatching,
      onConfigError: o.onConfigError,
    })
    this.engine = new BatchEngine<QItem>({
      ...this.#config.initial,
      concurrency: o.runner.concurrency,
      run: (b) => this.#requests.run(b),
      expire: (v, reason) => this.#requests.expire(v, reason),
      onRunError: (e) => {
        if (e !== NOT_A_SAMPLE) {
          this.#tel.logger.error({ model: o.runner.name, err: e }, 'batch run failed')
        }
      },
      onCapChange: (c) => this.#stats.capChange(c, this.#tel.logger, o.workerId, this.engine.config.maxBatchSize),
      tenantWeight: (t) => (o.tenantWeights !== undefined && Object.hasOwn(o.tenantWeights, t) ? (o.tenantWeights[t] as number) : 1),
    })
    this.#listening = new Listening({
      transport: o.transport,
      subjects: o.subjects,
      name: o.runner.name,
      capacityAware: o.capacityAware,
      highWater: o.highWater,
      concurrency: o.runner.concurrency,
      engine: this.engine,
      closing: () => this.#closing !== undefined,
      onInfer: (m) => this.#requests.onInfer(m),
      onMeta: (m) => m.respond(encodeValue(this.meta())),
      onCancel: (m) => this.#requests.onCancel(m),
    })
    const runner = o.runner
    this.#requests = new Requests({
      runner,
      transport: o.transport,
      subjects: o.subjects,
      workerId: o.workerId,
      outputSchema: o.outputSchema,
      batchTimeoutMs: o.batchTimeoutMs,
      engine: this.engine,
      tel: this.#tel,
      stats: this.#stats,
      signal: this.#abort.signal,
      version: o.version,
      stall: this.#stall,
      regulate: () => {
        this.#listening.regulate()
        this.onQueueChange?.()
      },
      generator: runner instanceof GenerativeRunner ? () => runner.generator : undefined,
      generationProbeMs: o.generationProbeMs,
    })
    checkBatchTimeoutMs(o.batchTimeoutMs)
    o.runner.observe?.(runnerEvents(o.runner.name, o.workerId, o.metrics, this.#tel.logger))
  }

  /** Called whenever the queue depth may have changed (a repository's bare-name listener regulates on it). */
  onQueueChange: (() => void) | undefined

  /** The repository version served (docs/repository.md); undefined for a model without versions. */
  get version(): string | undefined {
    return this.#o.version
  }

  /** True once draining: no new work may be handed to it. */
  get closing(): boolean {
    return this.#closing !== undefined
  }

  /** Take an inference message received elsewhere (a repository model's bare subjects). */
  take(m: TransportMessage): void {
    this.#requests.onInfer(m)
  }

  /** Take a cancel notice received elsewhere (a repository model's bare subjects). */
  cancel(m: TransportMessage): void {
    this.#requests.onCancel(m)
  }

  /**
   * Request counters of the NATS services protocol (`$SRV.STATS`, see services.ts): inference
   * requests received on the main and overflow subjects, those answered with an error (request-level
   * or any failed item), those answered, the latest error and the summed receipt-to-reply time in ns.
   */
  get requestStats(): RequestStats {
    return this.#stats.requests
  }

  /** Triton-style inference statistics (`$SRV.STATS` data, the gateway's `/v2/models/{m}/stats`). */
  get inferStats(): InferStats {
    return this.#stats.infer
  }

  /** Generations running now (generative models; 0 for others). */
  get runningGenerations(): number {
    return this.#requests.generations?.running ?? 0
  }

  /** True while a batch runs past its items' deadlines and its expected time (the model reports not ready). */
  get stalled(): boolean {
    return this.#stall.stalled
  }

  /** Items in batches running now. */
  get runningItems(): number {
    return this.#requests.runningItems
  }

  /** Times the worker stopped listening on the main subject because it was full. */
  get pauses(): number {
    return this.#listening.pauses
  }

  /** True while the worker is not listening on the main subject (full). */
  get paused(): boolean {
    return this.#listening.paused
  }

  /** Subscribe to the model's subjects and announce it. The runner must be started. */
  async start(): Promise<void> {
    const { transport: t } = this.#o
    const name = this.runner.name
    if (this.#o.followConfig ?? true) {
      this.#watch = t.config.watch(name, (cfg) => this.applyConfig(cfg))
      const current = await t.config.get(name).catch(() => undefined)
      if (current) {
        this.applyConfig(current)
      }
    }
    this.#listening.start()
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

  /** Items the engine takes before the main subject would pause (async jobs are pulled only then). */
  room(): number {
    return this.#listening.room()
  }

  /** Run a request through the same path as one from the bus (async jobs); resolves with its reply. */
  submit(req: InferRequest): Promise<InferReply> {
    return new Promise((resolve) => {
      // In this process: carried as values (checked as decodes would check them), not encoded to
      // msgpack and decoded again; `data` and `respond` serve a reply past msgpackSizeBound.
      let data: Uint8Array | undefined
      this.#requests.onInfer({
        subject: 'job',
        value: req,
        get data() {
          return (data ??= encodeRequest(req))
        },
        respond: (bytes) => {
          resolve(decodeReply(bytes))
          return true
        },
        respondValue: (body) => {
          resolve(replyFrom(body.value))
          return true
        },
      })
    })
  }

  /**
   * Apply a stored runtime configuration: its batching fields (`@cohort/batching`'s table, own
   * keys only; other keys are ignored) as the whole runtime layer. Bad values are reported, and
   * nothing of that config applied.
   */
  applyConfig(cfg: Record<string, unknown>): void {
    this.#config.applyStored(this.engine, cfg)
  }

  /**
   * Merge `patch` into the runtime layer in code (`CohortWorker.configure`); the stored config, when
   * it changes, replaces that layer as a whole.
   * @throws RangeError for values out of bounds or past the model's batch limit.
   */
  configureRuntime(patch: Partial<BatchingConfig>): void {
    this.#config.configureRuntime(this.engine, patch)
  }

  /** Where each live batching value came from (`default`, `model`, `file`, `flags`, `runtime`). */
  get configSources(): LayeredBatching['sources'] {
    return this.#config.sources
  }

  /** The live batching settings, for log lines (`maxBatchCost` null when unlimited). */
  batchingSummary(): Record<string, unknown> {
    return batchingSummary(this.engine, this.runner)
  }

  /** Model metadata with the live batching config (and the version, for a repository model). */
  meta() {
    const base = serverMeta(this.runner, this.engine, this.#config.sources)
    const stalledMs = this.#stall.stalledMs()
    // A batch hung past its items' deadlines: not ready until it ends (docs/reliability.md#readiness-of-a-hung-model).
    const m = stalledMs === undefined ? base : { ...base, ready: false, stalledMs: Math.round(stalledMs) }
    const v = this.#o.version
    return v === undefined ? m : { ...m, versions: [v], version: v }
  }

  /** Stop taking requests, finish every one already received, then release the model. */
  drain(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#jobs?.close()
      await this.#listening.drainInfer()
      // Batching changes still apply to what it holds (a lowered maxDelayMs ends a long wait for
      // company that can no longer come): the config watch stops only once the queue is empty.
      await this.engine.idle()
      this.#watch?.stop()
      // Generations end on their own (stop condition or deadline); runner.close ends any left.
      await this.#requests.generations?.idle()
      this.#listening.unsubscribe()
      this.engine.close()
      this.#abort.abort()
      await this.runner.close()
      this.#requests.generations?.close()
    })()
    return this.#closing
  }
}
