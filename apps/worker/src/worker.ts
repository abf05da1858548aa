import type { BatchingConfig } from '@cohort/batching'
import { encodeValue, subjects as makeSubjects, DEFAULT_SUBJECT_PREFIX, type ModelMeta } from '@cohort/protocol'
import { Registry, workerMetrics, type WorkerMetrics } from '@cohort/metrics'
import type { Transport, TransportSubscription } from '@cohort/transport'
import { ModelServer } from './model-server.ts'
import type { ModelRunner } from './runners/types.ts'

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
  /** Where metrics go. @default a new registry */
  registry?: Registry
  /** Capacity-aware distribution (see ModelServerOptions.capacityAware). @default true */
  capacityAware?: boolean
  /** Output schemas of predictors by model name. */
  outputSchemas?: Record<string, import('@sinclair/typebox').TSchema | undefined>
}

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
  #discover: TransportSubscription | undefined
  #draining: Promise<void> | undefined

  constructor(o: CohortWorkerOptions) {
    this.#o = o
    this.id = o.id ?? `w-${Math.random().toString(36).slice(2, 10)}`
    this.registry = o.registry ?? new Registry()
    this.metrics = workerMetrics(this.registry)
  }

  /** Load every model (with warm-up), then start serving. */
  async start(): Promise<void> {
    const subjects = makeSubjects(this.#o.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
    await Promise.all(this.#o.runners.map((r) => r.start()))
    for (const runner of this.#o.runners) {
      const s = new ModelServer({
        runner,
        transport: this.#o.transport,
        subjects,
        metrics: this.metrics,
        workerId: this.id,
        outputSchema: this.#o.outputSchemas?.[runner.name],
        capacityAware: this.#o.capacityAware ?? true,
        ...(this.#o.batching ? { batching: this.#o.batching } : {}),
      })
      await s.start()
      this.servers.push(s)
    }
    this.metrics.queueDepth.collect(() => this.servers.map((s) => [{ model: s.runner.name }, s.engine.queued]))
    this.metrics.costA.collect(() => this.servers.map((s) => [{ model: s.runner.name }, s.engine.costModel.a / 1000]))
    this.metrics.costC.collect(() => this.servers.map((s) => [{ model: s.runner.name }, s.engine.costModel.c / 1000]))
    this.metrics.costSamples.collect(() => this.servers.map((s) => [{ model: s.runner.name }, s.engine.costModel.samples]))
    this.#discover = this.#o.transport.subscribe(subjects.discover())
    void (async () => {
      for await (const m of this.#discover!) {
        m.respond(encodeValue({ worker: this.id, models: this.models() }))
      }
    })()
  }

  /** Metadata of every served model. */
  models(): ModelMeta[] {
    return this.servers.map((s) => s.meta())
  }

  /** Change batching of one model (or all) at runtime. */
  configure(patch: Partial<BatchingConfig>, model?: string): void {
    for (const s of this.servers) {
      if (!model || s.runner.name === model) {
        s.engine.configure(patch)
      }
    }
  }

  /** Stop taking work, finish what is held, release models. Idempotent. */
  drain(): Promise<void> {
    this.#draining ??= (async () => {
      this.#discover?.unsubscribe()
      await Promise.allSettled(this.servers.map((s) => s.drain()))
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
