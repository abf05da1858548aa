import { CohortError } from '@cohort/protocol'
import {
  DEFAULT_DEFER_DELAY_MS,
  DEFAULT_DEFER_MAX_DELAY_MS,
  deferDelay,
  isTerminal,
  LOAD_REFUSALS,
  PredictionLifecycle,
  WebhookSender,
  type Prediction,
  type PredictionOutcome,
} from '@cohort/predictions'
import type { InferenceDoor } from '../door.ts'
import { DEFAULT_JOB_TIMEOUT_MS, type PredictionJobOptions, type PredictionJobs } from './types.ts'

interface Entry {
  p: Prediction
  abort: AbortController
  done: Promise<void>
}

/**
 * Async predictions held in gateway memory (the embedded default, no NATS): each runs through the
 * inference door as a `job` (admitted, traced and counted as sync traffic, and batched with it).
 * A refusal for load (OVERLOADED, SHUTTING_DOWN) is not a failure: the prediction waits (1 s
 * doubling to 10 s, with jitter) and is tried again until its deadline; any other refusal fails it
 * with its code. A restart loses them.
 */
export class MemoryJobs implements PredictionJobs {
  readonly kind = 'memory'
  readonly #door: InferenceDoor
  readonly #timeoutMs: number
  readonly #max: number
  readonly #deferMs: number
  readonly #deferMaxMs: number
  readonly #entries = new Map<string, Entry>()
  readonly webhooks: WebhookSender
  readonly #life: PredictionLifecycle
  #closed = false

  constructor(door: InferenceDoor, o: PredictionJobOptions = {}) {
    this.#door = door
    this.#timeoutMs = o.timeoutMs ?? DEFAULT_JOB_TIMEOUT_MS
    this.#max = o.maxInMemory ?? 10_000
    this.#deferMs = o.deferDelayMs ?? DEFAULT_DEFER_DELAY_MS
    this.#deferMaxMs = o.deferMaxDelayMs ?? DEFAULT_DEFER_MAX_DELAY_MS
    this.webhooks = new WebhookSender(o.webhooks)
    this.#life = new PredictionLifecycle(this.webhooks)
  }

  submit(p: Prediction): Promise<{ prediction: Prediction; created: boolean }> {
    if (this.#closed) {
      return Promise.reject(new CohortError('SHUTTING_DOWN', 'the gateway is closing'))
    }
    const cur = this.#entries.get(p.id)
    if (cur) {
      return Promise.resolve({ prediction: cur.p, created: false })
    }
    const full = this.#evict()
    if (full) {
      return Promise.reject(full)
    }
    const abort = new AbortController()
    const e: Entry = { p, abort, done: Promise.resolve() }
    this.#entries.set(p.id, e)
    e.done = this.#run(e)
    return Promise.resolve({ prediction: p, created: true })
  }

  get(id: string): Promise<Prediction | undefined> {
    return Promise.resolve(this.#entries.get(id)?.p)
  }

  cancel(id: string): Promise<Prediction | undefined> {
    const e = this.#entries.get(id)
    if (!e) {
      return Promise.resolve(undefined)
    }
    if (!isTerminal(e.p.status)) {
      e.p = this.#life.cancel(e.p)
      e.abort.abort()
    }
    return Promise.resolve(e.p)
  }

  async wait(id: string, timeoutMs: number): Promise<Prediction | undefined> {
    const e = this.#entries.get(id)
    if (!e) {
      return undefined
    }
    let t: ReturnType<typeof setTimeout> | undefined
    await Promise.race([e.done, new Promise((r) => (t = setTimeout(r, timeoutMs)))])
    clearTimeout(t)
    return this.#entries.get(id)?.p
  }

  close(): Promise<void> {
    this.#closed = true
    this.webhooks.close()
    return Promise.resolve()
  }

  async #run(e: Entry): Promise<void> {
    await Promise.resolve()
    e.p = this.#life.start(e.p, { attempts: 1 })
    this.#life.started(e.p)
    const outcome = await this.#untilServed(e, Date.now() + this.#timeoutMs)
    if (isTerminal(e.p.status)) {
      return // canceled meanwhile: the cancel wins
    }
    e.p = this.#life.finish(e.p, outcome)
    this.#life.finished(e.p)
  }

  /**
   * Send the prediction through the door; while it is refused for load, wait (counted in its
   * record's `deferrals`) and send again, until a wait would end past `deadline`, it is canceled
   * or the jobs close. The last outcome.
   */
  async #untilServed(e: Entry, deadline: number): Promise<PredictionOutcome> {
    for (let n = 1; ; n++) {
      const outcome = await this.#door.predict({ origin: 'job', route: 'job', model: e.p.model, input: e.p.input, deadline, id: e.p.id, signal: e.abort.signal })
      const code = outcome.error?.code
      const waitMs = deferDelay(n, this.#deferMs, this.#deferMaxMs)
      if (code === undefined || !LOAD_REFUSALS.has(code) || Date.now() + waitMs >= deadline || this.#stopped(e)) {
        return outcome
      }
      e.p = { ...e.p, deferrals: n }
      await pause(waitMs, e.abort.signal)
      if (this.#stopped(e)) {
        return outcome
      }
    }
  }

  /** True once `e` is canceled (or finished) or the jobs closed: no further try. */
  #stopped(e: Entry): boolean {
    return this.#closed || e.abort.signal.aborted || isTerminal(e.p.status)
  }

  /** Forget the oldest finished predictions beyond the bound; the OVERLOADED error (to reject with) when none can go. */
  #evict(): CohortError | undefined {
    if (this.#entries.size < this.#max) {
      return undefined
    }
    for (const [id, e] of this.#entries) {
      if (this.#entries.size < this.#max) {
        break
      }
      if (isTerminal(e.p.status)) {
        this.#entries.delete(id)
      }
    }
    if (this.#entries.size >= this.#max) {
      return new CohortError('OVERLOADED', `${this.#max} async predictions are running; retry later`, { retryAfterS: 1 })
    }
    return undefined
  }
}

/** Resolve after `ms` or once `signal` aborts (an unref'd timer: it never holds the process). */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const t = setTimeout(done, ms)
    ;(t as { unref?: () => void }).unref?.()
    signal.addEventListener('abort', done, { once: true })
  })
}
