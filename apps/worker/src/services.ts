import {
  COHORT_VERSION,
  SERVICE_NAME,
  SERVICE_RESPONSE_TYPES,
  SERVICE_VERBS,
  isSubjectToken,
  serviceSubject,
  type ServiceEndpointInfo,
  type ServiceEndpointStats,
  type ServiceIdentity,
  type ServiceInfoResponse,
  type ServicePingResponse,
  type ServiceStatsResponse,
  type ServiceVerb,
  type Subjects,
} from '@cohort/protocol'
import { consume, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import type { ModelServer } from './model-server.ts'

/** Version the worker reports in `$SRV` answers (semver, as ADR-32 requires). */
export const WORKER_SERVICE_VERSION = COHORT_VERSION

/** Options of {@link WorkerServices}. */
export interface WorkerServicesOptions {
  transport: Transport
  /** The worker id: the service instance id. */
  id: string
  subjects: Subjects
  /** The subject prefix (reported in metadata so gateways of another deployment can skip us). */
  subjectPrefix: string
  /** The model servers, read at every request (live config and counters). */
  servers: () => readonly ModelServer[]
  /** True while the worker drains: reported as metadata `state: draining`, endpoints not ready. */
  draining: () => boolean
  /** @default WORKER_SERVICE_VERSION */
  version?: string
  /** @default 'Cohort ML model worker: batches inference requests per model' */
  description?: string
}

const enc = new TextEncoder()

/**
 * The NATS services protocol (ADR-32) for one worker: answers `$SRV.PING|INFO|STATS`, the
 * name-qualified `$SRV.<VERB>.cohort-worker` and the instance-qualified
 * `$SRV.<VERB>.cohort-worker.<id>` (the last only when the id is one subject token) with
 * `io.nats.micro.v1.*_response` JSON. Each model is one endpoint. Plain subscriptions (no queue
 * group), so every worker answers a discovery request; works over any {@link Transport}.
 */
export class WorkerServices {
  readonly #o: WorkerServicesOptions
  #subs: TransportSubscription[] = []
  #started: Date | undefined

  constructor(o: WorkerServicesOptions) {
    this.#o = o
  }

  /** The subjects answered, PING, INFO then STATS. */
  subjects(): string[] {
    const id = this.#o.id
    return SERVICE_VERBS.flatMap((v) => [serviceSubject(v), serviceSubject(v, SERVICE_NAME), ...(isSubjectToken(id) ? [serviceSubject(v, SERVICE_NAME, id)] : [])])
  }

  /** Start answering. Idempotent. */
  start(): void {
    if (this.#started) {
      return
    }
    this.#started = new Date()
    for (const verb of SERVICE_VERBS) {
      for (const subject of [serviceSubject(verb), serviceSubject(verb, SERVICE_NAME)]) {
        this.#listen(subject, verb)
      }
      if (isSubjectToken(this.#o.id)) {
        this.#listen(serviceSubject(verb, SERVICE_NAME, this.#o.id), verb)
      }
    }
  }

  /** Stop answering now. Idempotent. */
  stop(): void {
    for (const s of this.#subs.splice(0)) {
      s.unsubscribe()
    }
  }

  #listen(subject: string, verb: ServiceVerb): void {
    const sub = this.#o.transport.subscribe(subject)
    this.#subs.push(sub)
    void consume(
      sub,
      (m) => this.#answer(m, verb),
      (e) => console.error(`cohort: $SRV subscription ${subject} failed: ${e instanceof Error ? e.message : String(e)}`),
    )
  }

  #answer(m: TransportMessage, verb: ServiceVerb): void {
    let body: unknown
    try {
      body = verb === 'PING' ? this.ping() : verb === 'INFO' ? this.info() : this.stats()
    } catch (e) {
      // A discovery answer must never take the worker down; say what went wrong instead.
      body = { type: 'io.nats.micro.v1.error', error: e instanceof Error ? e.message : String(e) }
    }
    m.respond(enc.encode(JSON.stringify(body)))
  }

  #identity(): ServiceIdentity {
    return {
      name: SERVICE_NAME,
      id: this.#o.id,
      version: this.#o.version ?? WORKER_SERVICE_VERSION,
      metadata: {
        models: this.#o
          .servers()
          .map((s) => s.runner.name)
          .join(','),
        subject_prefix: this.#o.subjectPrefix,
        state: this.#o.draining() ? 'draining' : 'serving',
      },
    }
  }

  /** The `$SRV.PING` answer. */
  ping(): ServicePingResponse {
    return { type: SERVICE_RESPONSE_TYPES.PING, ...this.#identity() }
  }

  /** The `$SRV.INFO` answer: one endpoint per model with its live batching settings. */
  info(): ServiceInfoResponse {
    const draining = this.#o.draining()
    return {
      type: SERVICE_RESPONSE_TYPES.INFO,
      ...this.#identity(),
      description: this.#o.description ?? 'Cohort ML model worker: batches inference requests per model',
      endpoints: this.#o.servers().map((s): ServiceEndpointInfo => {
        const meta = s.meta()
        const metadata: Record<string, string> = {
          model: s.runner.name,
          max_batch_size: String(meta.maxBatchSize),
          max_delay_ms: String(meta.maxDelayMs),
          policy: meta.policy,
          max_queue: String(meta.maxQueue),
          concurrency: String(s.runner.concurrency),
          ready: String(meta.ready && !draining),
          kind: meta.kind,
          platform: meta.platform,
          overflow_subject: this.#o.subjects.overflow(s.runner.name, s.version),
        }
        if (s.version !== undefined) {
          metadata['version'] = s.version
        }
        if (meta.maxBatchCost !== null) {
          metadata['max_batch_cost'] = String(meta.maxBatchCost)
        }
        return { ...this.#endpoint(s), metadata }
      }),
    }
  }

  /** The `$SRV.STATS` answer: request counters per model (times in ns) and batching data. */
  stats(): ServiceStatsResponse {
    return {
      type: SERVICE_RESPONSE_TYPES.STATS,
      ...this.#identity(),
      started: (this.#started ?? new Date()).toISOString(),
      endpoints: this.#o.servers().map((s): ServiceEndpointStats => {
        const r = s.requestStats
        const e = s.engine.stats
        return {
          ...this.#endpoint(s),
          num_requests: r.requests,
          num_errors: r.errors,
          last_error: r.lastError,
          processing_time: r.processingNs,
          // Over answered requests: those still in flight have no processing time yet.
          average_processing_time: r.answered > 0 ? Math.round(r.processingNs / r.answered) : 0,
          data: {
            queued: s.engine.queued,
            running: s.runningItems,
            batches: e.batches,
            items: e.items,
            mean_batch_size: e.batches > 0 ? e.items / e.batches : 0,
            inference: s.inferStats.snapshot(),
          },
        }
      }),
    }
  }

  #endpoint(s: ModelServer): { name: string; subject: string; queue_group: string } {
    const model = s.runner.name
    return {
      // ADR-32 endpoint names are [A-Za-z0-9_-]+ (the nats CLI rejects others); model names may
      // hold dots, so those become '_' here and INFO's metadata.model keeps the real name.
      // A repository version's endpoint is `<model>-v<version>` (metadata.version holds it).
      name: model.replace(/[^A-Za-z0-9_-]/g, '_') + (s.version !== undefined ? `-v${s.version}` : ''),
      subject: this.#o.subjects.infer(model, s.version),
      queue_group: this.#o.subjects.queue(model, s.version),
    }
  }
}
