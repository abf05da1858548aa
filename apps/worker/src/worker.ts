import type { BatchingConfig } from '@cohort/batching'
import { encodeHeartbeat, PROTOCOL_VERSION, encodeValue, subjects as makeSubjects, DEFAULT_SUBJECT_PREFIX, type ModelMeta, type WaitEstimate } from '@cohort/protocol'
import { Registry, workerMetrics, type WorkerMetrics } from '@cohort/metrics'
import { consume, type Transport, type TransportSubscription } from '@cohort/transport'
import type { Tracer } from '@opentelemetry/api'
import type { TSchema } from '@sinclair/typebox'
import { consoleErrorLogger, defaultTracer, type Logger } from '@cohort/observability'
import { ModelServer } from './model-server.ts'
import type { WorkerJobOptions } from './jobs.ts'
import { WorkerServices } from './services.ts'
import type { ModelRunner } from './runners/types.ts'
import { heartbeatWait } from './model-server/wait.ts'
import { ModelRepository, type ModelRepositoryOptions } from './repository/repository.ts'

/** A worker's model repository (docs/repository.md): the folder, polling, the flags over config.json. */
export type WorkerRepositoryOptions = Pick<ModelRepositoryOptions, 'dir' | 'pollMs' | 'flags' | 'runner' | 'allowLinksOutside'>

/** Options of {@link CohortWorker}. */
export interface CohortWorkerOptions {
  transport: Transport
  runners: ModelRunner[]
  /** Worker id in replies and discovery. @default random */
  id?: string
  /** @default 'cohort' */
  subjectPrefix?: string
  /** Batching overrides applied to every model. */
  batching?: Partial<BatchingConfig>
  /** Weights of tenants' fair shares of batch slots (see ModelServerOptions.tenantWeights). */
  tenantWeights?: Readonly<Record<string, number>>
  /** Per-model batching flags by model name, over `batching` (`--model NAME=PATH,max-batch-size=4`). */
  modelBatching?: Record<string, Partial<BatchingConfig>>
  /** Where metrics go. @default a new registry */
  registry?: Registry
  /** Capacity-aware distribution (see ModelServerOptions.capacityAware). @default true */
  capacityAware?: boolean
  /** Output schemas of predictors by model name. */
  outputSchemas?: Record<string, TSchema | undefined>
  /**
   * Tracer of the `cohort.worker.request` and `cohort.worker.batch` spans (docs/observability.md).
   * @default trace.getTracer('cohort'): a no-op unless an OpenTelemetry SDK is registered
   */
  tracer?: Tracer
  /**
   * Structured logger (pino fits): startup, configuration changes, drain, batch failures.
   * @default errors to console.error, other levels dropped
   */
  logger?: Logger
  /**
   * Publish a heartbeat on `cohort.heartbeat` every this many ms (0: never). Gateways fail or retry
   * the requests a worker holds once its heartbeats stop (docs/architecture.md#worker-loss).
   * @default 1000
   */
  heartbeatMs?: number
  /**
   * Generative models: how long a pack of generations may send no `tokens` message before it gets
   * an empty one, the slow fallback of gone-gateway detection (streamed generations are watched at
   * every step; docs/generative.md#streaming-over-nats). 0: no fallback. @default 1000
   */
  generationProbeMs?: number
  /**
   * Async prediction jobs (NATS JetStream): every model pulls its jobs into its batch engine while
   * the engine has room. Off when absent (the embedded gateway then runs async predictions itself).
   */
  jobs?: WorkerJobOptions
  /** Per-batch time limit of every model, ms (0: none); see ModelServerOptions.batchTimeoutMs. */
  batchTimeoutMs?: number
  /**
   * Serve the models of a repository folder too (`--model-repository DIR`; docs/repository.md):
   * versions under their version policy, load and unload at runtime, polling when `pollMs` > 0.
   */
  repository?: WorkerRepositoryOptions
}

/** Default interval of worker heartbeats, ms. */
export const DEFAULT_HEARTBEAT_MS = 1000

/**
 * A long-lived worker: loads its models, serves each on its NATS subjects in the model's
 * queue group, batches, replies per item, and drains on `drain()`.
 */
export class CohortWorker {
  readonly id: string
  readonly registry: Registry
  readonly metrics: WorkerMetrics
  readonly servers: ModelServer[] = []
  readonly #o: CohortWorkerOptions
  readonly #log: Logger
  #discover: TransportSubscription | undefined
  #draining: Promise<void> | undefined
  #heartbeat: ReturnType<typeof setInterval> | undefined
  /** The NATS services protocol responder ($SRV.PING/INFO/STATS); set once started. */
  services: WorkerServices | undefined
  /** The model repository (with `repository`); set once started. */
  repository: ModelRepository | undefined

  constructor(o: CohortWorkerOptions) {
    this.#o = o
    this.id = o.id ?? `w-${Math.random().toString(36).slice(2, 10)}`
    this.registry = o.registry ?? new Registry()
    this.metrics = workerMetrics(this.registry)
    this.#log = o.logger ?? consoleErrorLogger
  }

  /** Load every model (with warm-up), then start serving. */
  async start(): Promise<void> {
    const subjects = makeSubjects(this.#o.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
    for (const r of this.#o.runners) {
      r.instrument?.(this.registry)
    }
    await Promise.all(this.#o.runners.map((r) => r.start()))
    for (const runner of this.#o.runners) {
      const s = new ModelServer({
        ...this.#serverOptions(runner),
        subjects: runner.subjects?.(subjects) ?? subjects,
        ...(this.#o.modelBatching?.[runner.name] ? { modelBatching: this.#o.modelBatching[runner.name] } : {}),
        ...(this.#o.jobs ? { jobs: this.#o.jobs } : {}),
      })
      await s.start()
      this.servers.push(s)
    }
    if (this.#o.repository) {
      this.repository = new ModelRepository({
        ...this.#o.repository,
        transport: this.#o.transport,
        subjects,
        workerId: this.id,
        logger: this.#log,
        capacityAware: this.#o.capacityAware ?? true,
        registry: this.registry,
        host: {
          // Every version pulls the model's async jobs (a job names no version: any version served runs it).
          server: (runner, x) => new ModelServer({ ...this.#serverOptions(runner), ...x, ...(this.#o.jobs ? { jobs: this.#o.jobs } : {}) }),
          add: (s) => this.servers.push(s),
          remove: (s) => {
            const i = this.servers.indexOf(s)
            if (i >= 0) {
              this.servers.splice(i, 1)
            }
          },
        },
      })
      await this.repository.start()
    }
    this.#collectModelGauges()
    this.#discover = this.#o.transport.subscribe(subjects.discover())
    // Only announced models: pipeline stages served here (`--stage`) are not models (docs/pipelines.md).
    const announced = () => this.servers.filter((s) => s.runner.announce !== false).map((s) => s.meta())
    void consume(
      this.#discover,
      (m) => m.respond(encodeValue({ worker: this.id, models: announced() })),
      (e) => console.error(`cohort: discovery subscription failed: ${e instanceof Error ? e.message : String(e)}`),
    )
    const prefix = this.#o.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX
    this.services = new WorkerServices({
      transport: this.#o.transport,
      id: this.id,
      subjects,
      subjectPrefix: prefix,
      servers: () => this.servers,
      draining: () => this.#draining !== undefined,
    })
    this.services.start()
    this.#startHeartbeat(subjects.heartbeat())
    this.#log.info(
      {
        workerId: this.id,
        subjectPrefix: prefix,
        capacityAware: this.#o.capacityAware ?? true,
        models: this.servers.map((s) => ({ name: s.runner.name, kind: s.runner.meta().kind, ...s.batchingSummary() })),
      },
      'worker started',
    )
  }

  /** The model gauges, one series per model: a repository model's versions add up (queues) or show the largest (caps). */
  #collectModelGauges(): void {
    const sum = (a: number, b: number) => a + b
    const byModel = (value: (s: ModelServer) => number, combine: (a: number, b: number) => number) => () => {
      const out = new Map<string, number>()
      for (const s of this.servers) {
        const prev = out.get(s.runner.name)
        out.set(s.runner.name, prev === undefined ? value(s) : combine(prev, value(s)))
      }
      return [...out].map(([model, v]): [{ model: string }, number] => [{ model }, v])
    }
    this.metrics.queueDepth.collect(byModel((s) => s.engine.queued, sum))
    this.metrics.costA.collect(byModel((s) => s.engine.costModel.a / 1000, Math.max))
    this.metrics.costC.collect(byModel((s) => s.engine.costModel.c / 1000, Math.max))
    this.metrics.costSamples.collect(byModel((s) => s.engine.costModel.samples, sum))
    this.metrics.batchCap.collect(byModel((s) => s.engine.batchCap, Math.max))
    this.metrics.batchLimit.collect(byModel((s) => s.engine.config.maxBatchSize, Math.max))
    this.metrics.pending.collect(byModel((s) => s.engine.queued + s.runningItems, sum))
  }

  /** The options every model server of this worker shares. */
  #serverOptions(runner: ModelRunner): Omit<ConstructorParameters<typeof ModelServer>[0], 'subjects'> {
    return {
      runner,
      transport: this.#o.transport,
      metrics: this.metrics,
      workerId: this.id,
      outputSchema: this.#o.outputSchemas?.[runner.name],
      capacityAware: this.#o.capacityAware ?? true,
      ...(this.#o.batching ? { batching: this.#o.batching } : {}),
      ...(this.#o.tenantWeights ? { tenantWeights: this.#o.tenantWeights } : {}),
      tracer: this.#o.tracer ?? defaultTracer(),
      logger: this.#log,
      ...(this.#o.batchTimeoutMs !== undefined ? { batchTimeoutMs: this.#o.batchTimeoutMs } : {}),
      ...(this.#o.generationProbeMs !== undefined ? { generationProbeMs: this.#o.generationProbeMs } : {}),
    }
  }

  /** Heartbeats from now until drained; the first one at once. */
  #startHeartbeat(subject: string): void {
    const intervalMs = this.#o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS
    if (!(intervalMs > 0)) {
      return
    }
    const beat = (bye?: true) => {
      try {
        const models = bye ? undefined : this.#waits()
        const stalled = bye ? [] : [...new Set(this.servers.filter((s) => s.stalled).map((s) => s.runner.name))]
        this.#o.transport.publish(
          subject,
          encodeHeartbeat({
            v: 1,
            id: this.id,
            intervalMs,
            proto: PROTOCOL_VERSION,
            ...(bye ? { bye } : {}),
            ...(models ? { models } : {}),
            ...(stalled.length > 0 ? { stalled } : {}),
          }),
        )
      } catch {
        // A closed connection: the next beat (or none) will tell.
      }
    }
    beat()
    this.#heartbeat = setInterval(beat, intervalMs)
    this.#heartbeat.unref()
    this.#stopHeartbeat = () => {
      clearInterval(this.#heartbeat)
      this.#heartbeat = undefined
      beat(true)
    }
  }

  #stopHeartbeat: (() => void) | undefined

  /** Each announced model's queue-wait estimate, for the gateways' doors (docs/batching.md#admission-at-the-door). */
  #waits(): Record<string, WaitEstimate> | undefined {
    const out: Record<string, WaitEstimate> = {}
    let any = false
    for (const s of this.servers) {
      const w = s.runner.announce !== false ? heartbeatWait(s.engine) : undefined
      if (w) {
        out[s.runner.name] = w
        any = true
      }
    }
    return any ? out : undefined
  }

  /** Metadata of every served model. */
  models(): ModelMeta[] {
    return this.servers.map((s) => s.meta())
  }

  /** Change batching of one model (or all) at runtime. */
  configure(patch: Partial<BatchingConfig>, model?: string): void {
    for (const s of this.servers) {
      if (!model || s.runner.name === model) {
        s.configureRuntime(patch)
        this.#log.info({ workerId: this.id, model: s.runner.name, patch, batching: s.batchingSummary() }, 'batching configuration changed')
      }
    }
  }

  /** Stop taking work, finish what is held, release models. Idempotent. */
  drain(): Promise<void> {
    this.#draining ??= (async () => {
      const t0 = Date.now()
      const queued = this.servers.reduce((a, s) => a + s.engine.queued + s.runningItems, 0)
      this.#log.info({ workerId: this.id, pendingItems: queued }, 'worker draining')
      this.#discover?.unsubscribe()
      // The repository first: no more loads, and its bare-name subjects hand on what they hold.
      await this.repository?.close()
      const servers = [...this.servers]
      const settled = await Promise.allSettled(servers.map((s) => s.drain()))
      settled.forEach((r, i) => {
        if (r.status === 'rejected') {
          this.#log.error({ workerId: this.id, model: servers[i]?.runner.name, err: r.reason }, 'model drain failed')
        }
      })
      this.#log.info({ workerId: this.id, ms: Date.now() - t0 }, 'worker drained')
      // Last: $SRV and heartbeats go on (state "draining") while accepted work finishes.
      this.services?.stop()
      this.#stopHeartbeat?.()
      this.#stopHeartbeat = undefined
    })()
    return this.#draining
  }

  /** Same as drain: a worker never drops what it accepted. */
  close(): Promise<void> {
    return this.drain()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}
