import type { NatsConnection } from '@nats-io/nats-core'
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, type JetStreamClient, type JsMsg } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { CohortError } from '@cohort/protocol'
import { isAckOf } from './reply-guard.ts'

/**
 * Durable async prediction jobs: a work-queue stream of job ids per model and a KV bucket of
 * prediction records (status and result). Works on nats-server 2.9.10 started with `-js`.
 */
export interface JobQueue {
  /** Store a new record under `id` unless one exists: the stored one wins (idempotent create). */
  create(id: string, record: Uint8Array): Promise<{ created: boolean; value: Uint8Array; revision: number }>
  /** The record and its revision, or undefined. */
  get(id: string): Promise<{ value: Uint8Array; revision: number } | undefined>
  /** Replace the record if it is still at `revision` (compare-and-set); false when it moved on. */
  update(id: string, record: Uint8Array, revision: number): Promise<boolean>
  /** Enqueue the job `id` for `model` (deduplicated by id within the stream's window). */
  enqueue(model: string, id: string): Promise<void>
  /**
   * Take up to `max` jobs of `model` (waits at most `expiresMs` for the first). Workers of a model
   * share one durable consumer; a job not acked within `ackWaitMs` goes to another worker.
   */
  pull(model: string, max: number, o: { ackWaitMs: number; expiresMs: number }): Promise<JobDelivery[]>
  /**
   * Deliveries of one job that may run it. The consumer itself redelivers without limit: the worker
   * that gets a delivery past this (less the deliveries it handed back unrun because its model was
   * overloaded or draining, counted in the record's `deferrals`) records the job failed without running it (a poison job that
   * kills its worker every time ends failed instead of staying `processing` for good). A limit on
   * the consumer would not do: a delivery to the pull request a dead worker left behind counts too,
   * so the last one could be swallowed and the job never recorded.
   */
  readonly maxDeliver: number
  /** Stop pulling. Idempotent; the connection stays open. */
  close(): Promise<void>
}

/** One delivery of a job: ack after its result is stored. */
export interface JobDelivery {
  id: string
  /** 1 on the first delivery, more after redeliveries. */
  deliveries: number
  ack(): void
  /** Give it back for redelivery after `delayMs`. */
  nak(delayMs?: number): void
  /** Extend the ack wait (the job is still running). */
  working(): void
}

/** Options of {@link createNatsJobQueue}. */
export interface NatsJobQueueOptions {
  /** Subject prefix: jobs go on `<prefix>.jobs.<model>`. @default 'cohort' */
  prefix?: string
  /** Replicas of the stream and bucket when this process creates them. @default 1 */
  replicas?: number
  /**
   * How long a prediction record is kept after its last write, ms (the bucket's TTL: records,
   * finished or not, expire then; a job still queued in the stream as long expires too). Applies
   * when this process creates the bucket and the stream. @default 7 days
   */
  recordTtlMs?: number
  /**
   * Most bytes the records bucket holds (inputs, outputs, logs of every prediction kept; -1: no bound).
   * When full, creating a prediction fails (JOBS_UNAVAILABLE, 503) until records expire or are
   * deleted; the jobs stream gets the same bound. Applies when this process creates them.
   * @default 1 GiB
   */
  recordMaxBytes?: number
  /** Deliveries of one job that may run it ({@link JobQueue.maxDeliver}). @default 10 */
  maxDeliver?: number
}

/** Default deliveries of one job that may run it. */
export const DEFAULT_JOB_MAX_DELIVER = 10
/** Default time a prediction record is kept after its last write: 7 days. */
export const DEFAULT_RECORD_TTL_MS = 7 * 24 * 3600_000
/** Default bound of the records bucket (and of the jobs stream): 1 GiB. */
export const DEFAULT_RECORD_MAX_BYTES = 1024 ** 3

/** The JetStream names for a prefix. */
export function jobNames(prefix = 'cohort') {
  const up = prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()
  return { stream: `${up}_JOBS`, bucket: `${prefix.replace(/[^A-Za-z0-9_-]/g, '_')}-predictions`, subject: (m: string) => `${prefix}.jobs.${m}` }
}

const unavailable = (e: unknown) =>
  new CohortError('JOBS_UNAVAILABLE', `async predictions need NATS JetStream (start nats-server with -js): ${e instanceof Error ? e.message : String(e)}`, {
    cause: e,
    retryAfterS: 5,
  })

type JobNames = ReturnType<typeof jobNames>
type JobHandles = { js: JetStreamClient; kv: KV }

/** The stream and the record bucket, created once on first use (again after a failure). */
function jobSetup(nc: NatsConnection, names: JobNames, o: NatsJobQueueOptions): () => Promise<JobHandles> {
  const replicas = o.replicas ?? 1
  const ttlMs = o.recordTtlMs ?? DEFAULT_RECORD_TTL_MS
  const maxBytes = o.recordMaxBytes ?? DEFAULT_RECORD_MAX_BYTES
  let ready: Promise<JobHandles> | undefined
  return () =>
    (ready ??= (async () => {
      const jsm = await jetstreamManager(nc, { timeout: 5000 })
      await jsm.streams.info(names.stream).catch(async () => {
        await jsm.streams.add({
          name: names.stream,
          subjects: [`${o.prefix ?? 'cohort'}.jobs.>`],
          retention: RetentionPolicy.Workqueue,
          duplicate_window: 2 * 60 * 1_000_000_000,
          num_replicas: replicas,
          max_age: ttlMs * 1_000_000,
          max_bytes: maxBytes,
        })
      })
      const kv = await new Kvm(nc).create(names.bucket, { history: 1, replicas, ttl: ttlMs, max_bytes: maxBytes })
      return { js: jetstream(nc), kv }
    })().catch((e: unknown) => {
      ready = undefined
      throw unavailable(e)
    }))
}

/** A model's durable consumer, added on first use. */
function jobConsumer(nc: NatsConnection, names: JobNames, setup: () => Promise<JobHandles>) {
  const consumers = new Set<string>()
  return async (model: string, ackWaitMs: number) => {
    const { js } = await setup()
    const durable = durableOf(model)
    if (!consumers.has(durable)) {
      const jsm = await jetstreamManager(nc)
      await jsm.consumers.info(names.stream, durable).catch(() =>
        jsm.consumers.add(names.stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          ack_wait: ackWaitMs * 1_000_000,
          filter_subject: names.subject(model),
          // Unlimited: the workers give a job up after `maxDeliver` deliveries (JobQueue.maxDeliver).
          max_deliver: -1,
        }),
      )
      consumers.add(durable)
    }
    return js.consumers.get(names.stream, durable)
  }
}

/** A {@link JobQueue} on NATS JetStream. Fails with JOBS_UNAVAILABLE (503) without JetStream. */
export function createNatsJobQueue(nc: NatsConnection, o: NatsJobQueueOptions = {}): JobQueue {
  const names = jobNames(o.prefix)
  const maxDeliver = o.maxDeliver ?? DEFAULT_JOB_MAX_DELIVER
  const setup = jobSetup(nc, names, o)
  const consumer = jobConsumer(nc, names, setup)
  let closed = false
  return {
    maxDeliver,
    async create(id, record) {
      const { kv } = await setup()
      try {
        const revision = await kv.create(id, record)
        return { created: true, value: record, revision }
      } catch (e) {
        const cur = await kv.get(id)
        if (cur && cur.operation === 'PUT') {
          return { created: false, value: cur.value, revision: cur.revision }
        }
        // Not stored (the bucket is full: recordMaxBytes, or JetStream is unavailable): retry later.
        throw new CohortError('JOBS_UNAVAILABLE', `the prediction could not be stored: ${e instanceof Error ? e.message : String(e)}`, { cause: e, retryAfterS: 5 })
      }
    },
    async get(id) {
      const { kv } = await setup()
      const e = await kv.get(id)
      return e && e.operation === 'PUT' ? { value: e.value, revision: e.revision } : undefined
    },
    async update(id, record, revision) {
      const { kv } = await setup()
      try {
        await kv.update(id, record, revision)
        return true
      } catch {
        return false
      }
    },
    async enqueue(model, id) {
      const { js } = await setup()
      await js.publish(names.subject(model), new TextEncoder().encode(id), { msgID: id })
    },
    async pull(model, max, po) {
      if (closed) {
        return []
      }
      const c = await consumer(model, po.ackWaitMs)
      const durable = durableOf(model)
      const it = await c.fetch({ max_messages: max, expires: Math.max(1000, po.expiresMs) })
      const out: JobDelivery[] = []
      for await (const m of it) {
        // The implementation carries the delivery's reply subject (the JsMsg interface does not name it).
        if (!isAckOf((m as JsMsg & { reply?: string }).reply, names.stream, durable)) {
          continue // Not a delivery of our consumer (reply-guard.ts): never ack into another subject.
        }
        out.push(delivery(m))
        if (out.length >= max) {
          break
        }
      }
      return out
    },
    close() {
      closed = true
      return Promise.resolve()
    },
  }
}

/** The durable consumer of a model's jobs. */
const durableOf = (model: string): string => `jobs-${model.replace(/\./g, '_')}`

function delivery(m: JsMsg): JobDelivery {
  return {
    id: new TextDecoder().decode(m.data),
    deliveries: m.info.deliveryCount,
    ack: () => m.ack(),
    nak: (d) => m.nak(d),
    working: () => m.working(),
  }
}
