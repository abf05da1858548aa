import type { InferReply, InferRequest } from '@cohort/protocol'
import {
  DEFAULT_DEFER_DELAY_MS,
  DEFAULT_DEFER_MAX_DELAY_MS,
  DEFAULT_JOB_TIMEOUT_MS,
  decodePrediction,
  deferDelay,
  LOAD_REFUSALS,
  encodePrediction,
  isTerminal,
  outcomeOf,
  PredictionLifecycle,
  WebhookSender,
  type Prediction,
  type WebhookOptions,
} from '@cohort/predictions'
import type { JobDelivery, JobQueue } from '@cohort/transport'
import type { Logger } from '@cohort/observability'

/** Async prediction jobs for a worker ({@link import('./worker.ts').CohortWorkerOptions.jobs}). */
export interface WorkerJobOptions {
  /** The durable job queue (`createNatsJobQueue`). */
  queue: JobQueue
  /**
   * Ack wait of the model's job consumer when this worker creates it, ms: a job whose worker died is
   * redelivered after it. A running job is kept alive meanwhile (`working`). @default 30000
   */
  ackWaitMs?: number
  /** Deadline of a job once pulled, ms. @default 600000 */
  timeoutMs?: number
  /** Webhook delivery (attempts, backoff). */
  webhooks?: WebhookOptions
  /**
   * How long a result that could not be stored (KV unavailable, or the record kept changing) is
   * retried, ms, with backoff from 100 ms doubling to 5 s, the job kept alive meanwhile: the job is
   * not run again for a failed store. Past it the job is handed back (nak) and may run again.
   * @default 30000
   */
  storeRetryMs?: number
  /**
   * Wait before a job the model refused for load (OVERLOADED, or SHUTTING_DOWN) is delivered again,
   * ms: doubled after each refusal of the same job up to `deferMaxDelayMs`, with jitter (a random
   * half to all of it). A refusal for load does not count against the delivery budget
   * (`maxDeliver`): it is recorded in the job's record (`deferrals`) and subtracted.
   * @default 1000
   */
  deferDelayMs?: number
  /** Longest wait before a refused job is delivered again, ms. @default 10000 */
  deferMaxDelayMs?: number
}

/** What the runner needs from the model server. */
export interface JobTarget {
  readonly name: string
  /** Run one request through the batch engine, like a request from the bus. */
  submit(req: InferRequest): Promise<InferReply>
  /** Items the engine can take before the worker would pause its main subject. */
  room(): number
  readonly maxBatchSize: number
}

/** How long a draining worker waits for webhook deliveries in progress. */
const WEBHOOK_DRAIN_MS = 5_000

/** Default time a result that could not be stored is retried: 30 s. */
export const DEFAULT_STORE_RETRY_MS = 30_000

export { DEFAULT_DEFER_DELAY_MS, DEFAULT_DEFER_MAX_DELAY_MS, deferDelay }

/** Default ack wait of a job consumer: 30 s. */
export const DEFAULT_JOB_ACK_WAIT_MS = 30_000

/**
 * Pulls a model's async prediction jobs from JetStream into the model's batch engine, only while
 * the engine has room (the same bound that pauses the main subject), so jobs batch with sync work.
 * At-least-once: a job is acked after its result is stored; the result is stored only while the
 * record is not terminal (compare-and-set), so a redelivered job is recorded once.
 *
 * A job the engine refuses for load is handed back (nak, with backoff) and its record's `deferrals`
 * counted up first: the runs a delivery may still take are its JetStream delivery count minus those,
 * so a long overload does not use up `maxDeliver` for jobs that never ran (docs/reliability.md).
 */
export class JobRunner {
  readonly #o: WorkerJobOptions
  readonly #t: JobTarget
  readonly #log: Logger
  readonly webhooks: WebhookSender
  readonly #life: PredictionLifecycle
  readonly #inflight = new Set<Promise<void>>()
  /**
   * Deliveries of the jobs this worker is handling, by id: a redelivery of one (its ack wait passed
   * while its result was still being stored) joins the first instead of running the job again, and
   * is acked, handed back or kept alive with it.
   */
  readonly #held = new Map<string, JobDelivery[]>()
  #stopped = false
  #loop: Promise<void> = Promise.resolve()
  #closing: Promise<void> | undefined

  constructor(o: WorkerJobOptions, t: JobTarget, log: Logger) {
    this.#o = o
    this.#t = t
    this.#log = log
    this.webhooks = new WebhookSender({
      ...o.webhooks,
      onGiveUp: (p, event, err) => log.warn({ model: t.name, predictionId: p.id, event, err }, 'webhook not delivered'),
    })
    this.#life = new PredictionLifecycle(this.webhooks)
  }

  start(): void {
    this.#loop = this.#run()
  }

  /** Stop pulling, finish the jobs taken. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stopped = true
      await this.#loop
      while (this.#inflight.size > 0) {
        await Promise.all([...this.#inflight])
      }
      // Webhooks already due get a short grace; retries still pending after it are dropped.
      await Promise.race([this.webhooks.idle(), sleep(WEBHOOK_DRAIN_MS)])
      this.webhooks.close()
    })()
    return this.#closing
  }

  async #run(): Promise<void> {
    const ackWaitMs = this.#o.ackWaitMs ?? DEFAULT_JOB_ACK_WAIT_MS
    let warned = false
    while (!this.#stopped) {
      const room = Math.min(this.#t.room(), this.#t.maxBatchSize)
      if (room <= 0) {
        await sleep(20)
        continue
      }
      let got: JobDelivery[]
      try {
        got = await this.#o.queue.pull(this.#t.name, room, { ackWaitMs, expiresMs: 1000 })
        warned = false
      } catch (e) {
        if (!warned) {
          this.#log.warn({ model: this.#t.name, reason: e instanceof Error ? e.message : String(e) }, 'async prediction jobs unavailable; retrying')
          warned = true
        }
        await sleep(2000)
        continue
      }
      for (const got1 of got) {
        const held = this.#held.get(got1.id)
        if (held) {
          held.push(got1)
          continue
        }
        const all = [got1]
        this.#held.set(got1.id, all)
        const d = together(got1, all)
        const p = this.#handle(d, ackWaitMs)
          .catch((err: unknown) => {
            this.#log.error({ model: this.#t.name, predictionId: d.id, err }, 'async prediction job failed; it will be redelivered')
            d.nak(1000)
          })
          .finally(() => this.#held.delete(got1.id))
        this.#inflight.add(p)
        void p.finally(() => this.#inflight.delete(p))
      }
    }
  }

  async #handle(d: JobDelivery, ackWaitMs: number): Promise<void> {
    const maxDeliver = this.#o.queue.maxDeliver
    // One compare-and-set decides from the record: the deliveries that were refusals for load
    // (`deferrals`) are not runs, so only the rest count against the budget.
    let runs = d.deliveries
    const started = await this.#update(d.id, (p) => {
      runs = d.deliveries - (p.deferrals ?? 0)
      if (runs > maxDeliver) {
        // Every allowed run was taken and none finished (its worker died, or storing failed):
        // record it failed rather than run it again or leave it `processing` for good.
        return this.#life.finish(
          { ...p, attempts: maxDeliver },
          { error: { code: 'PREDICTOR_FAILED', message: `gave up after ${maxDeliver} deliveries: none finished (its worker stopped or failed every time)` } },
        )
      }
      return this.#life.start(p, { attempts: runs })
    })
    if (!started) {
      d.ack() // unknown, canceled or already finished: nothing to run (deduplicated)
      return
    }
    if (started.after.status === 'failed') {
      d.ack()
      this.#log.warn({ model: this.#t.name, predictionId: d.id, deliveries: maxDeliver }, 'async prediction job given up')
      this.#life.finished(started.after)
      return
    }
    if (started.before.status === 'starting') {
      this.#life.started(started.after)
    }
    const p = started.after
    const keepAlive = setInterval(() => d.working(), Math.max(100, Math.floor(ackWaitMs / 2)))
    let reply: InferReply
    try {
      reply = await this.#t.submit({
        v: 1,
        id: p.id,
        model: p.model,
        deadline: Date.now() + (this.#o.timeoutMs ?? DEFAULT_JOB_TIMEOUT_MS),
        items: [p.input],
      })
    } finally {
      clearInterval(keepAlive)
    }
    const outcome = outcomeOf(reply)
    const code = outcome.error?.code
    if (code !== undefined && LOAD_REFUSALS.has(code)) {
      await this.#defer(d)
      return
    }
    const done = this.#life.finish(p, outcome)
    const stored = await this.#store(d, done)
    d.ack()
    if (stored) {
      this.#life.finished(done)
    }
  }

  /**
   * Hand back a job the engine refused for load (not run): count the refusal in its record first,
   * so this delivery is not a run, then nak it with backoff. When the count cannot be stored (the
   * record kept changing, KV unavailable) the delivery counts as a run, as before.
   */
  async #defer(d: JobDelivery): Promise<void> {
    let deferrals = 1
    try {
      const r = await this.#update(d.id, (p) => {
        deferrals = (p.deferrals ?? 0) + 1
        return { ...p, attempts: Math.max(0, d.deliveries - deferrals), deferrals }
      })
      if (!r) {
        d.ack() // canceled (or finished elsewhere) meanwhile: nothing left to run
        return
      }
    } catch (e) {
      this.#log.warn(
        { model: this.#t.name, predictionId: d.id, err: e instanceof Error ? e.message : String(e) },
        'async prediction job refusal not counted; it counts as a delivery',
      )
    }
    d.nak(deferDelay(deferrals, this.#o.deferDelayMs ?? DEFAULT_DEFER_DELAY_MS, this.#o.deferMaxDelayMs ?? DEFAULT_DEFER_MAX_DELAY_MS))
  }

  /**
   * Store a job's result, retrying a failed store (with backoff, the job kept alive) for
   * `storeRetryMs` instead of handing the job back: a result computed is not computed again
   * because one write failed. Throws the last failure once the time is up.
   */
  async #store(d: JobDelivery, done: Prediction): Promise<{ before: Prediction; after: Prediction } | undefined> {
    const end = Date.now() + (this.#o.storeRetryMs ?? DEFAULT_STORE_RETRY_MS)
    for (let wait = 100, tries = 1; ; tries++, wait = Math.min(5_000, wait * 2)) {
      try {
        return await this.#update(done.id, () => done)
      } catch (e) {
        if (Date.now() + wait > end) {
          throw e
        }
        this.#log.warn({ model: this.#t.name, predictionId: done.id, tries, err: e instanceof Error ? e.message : String(e) }, 'async prediction result not stored yet; retrying')
        d.working()
        await sleep(wait)
      }
    }
  }

  /** Compare-and-set a record that is not terminal; undefined when it is missing or terminal. */
  async #update(id: string, f: (p: Prediction) => Prediction): Promise<{ before: Prediction; after: Prediction } | undefined> {
    const q = this.#o.queue
    for (let i = 0; i < 20; i++) {
      const cur = await q.get(id)
      if (!cur) {
        return undefined
      }
      const before = decodePrediction(cur.value)
      if (isTerminal(before.status)) {
        return undefined
      }
      const after = f(before)
      if (await q.update(id, encodePrediction(after), cur.revision)) {
        return { before, after }
      }
    }
    throw new Error(`prediction ${id} kept changing`)
  }
}

/** One delivery standing for every delivery of the same job held (`all`): ack, nak and working reach each. */
function together(first: JobDelivery, all: JobDelivery[]): JobDelivery {
  return {
    id: first.id,
    deliveries: first.deliveries,
    ack: () => all.forEach((d) => d.ack()),
    nak: (delayMs) => all.forEach((d) => d.nak(delayMs)),
    working: () => all.forEach((d) => d.working()),
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}
