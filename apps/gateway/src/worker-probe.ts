import { SERVICE_NAME, isSubjectToken, serviceSubject } from '@cohort/protocol'
import { consume, type Transport, type TransportSubscription } from '@cohort/transport'

/** Options of {@link WorkerProbes}. All durations in ms. */
export interface WorkerProbeOptions {
  /** Consecutive no-responder answers that declare a worker gone (a connection moving between servers has none for a moment). @default 2 */
  confirmations?: number
  /** A probe unanswered this long is forgotten (a busy worker, a probe the gateway may not send): inconclusive. @default 1000 */
  timeoutMs?: number
  /** Clock, epoch ms (tests). @default Date.now */
  now?: () => number
}

/** A worker that never answered a probe is probed again on its heartbeats at most this often. */
const LEARN_EVERY_MS = 5000

interface Outstanding {
  worker: string
  sentAt: number
}

/**
 * Fast worker-loss detection through NATS's no-responders status (docs/architecture.md#worker-loss):
 * a probe is a publication on the worker's own services subject `$SRV.PING.cohort-worker.<id>` with
 * a reply subject under this gateway's inbox. A live worker answers it; once the worker's connection
 * is gone (kill -9, OOM: the server drops its subscriptions as soon as the socket closes) the server
 * answers at once that nobody subscribes there. Only a worker that answered a probe before can be
 * declared gone this way (a worker with another id form, an older worker or a gateway not allowed to
 * publish there never is: heartbeats still decide), and only after `confirmations` such answers in a
 * row. Anything else (no answer, late answers) is inconclusive and changes nothing.
 */
export class WorkerProbes {
  readonly #t: Transport
  readonly #onGone: (worker: string, why: string, since: number) => void
  readonly #confirmations: number
  readonly #timeoutMs: number
  readonly #now: () => number
  readonly #inbox: string
  readonly #sub: TransportSubscription | undefined
  readonly #outstanding = new Map<string, Outstanding>()
  /** Workers with a probe in flight. */
  readonly #busy = new Set<string>()
  /** Workers that answered a probe: their no-responder answers are conclusive. */
  readonly #answered = new Set<string>()
  /** No-responder answers in a row per worker, and when the first of them was sent. */
  /** When a worker that never answered was last probed to learn whether it answers. */
  readonly #learning = new Map<string, number>()
  readonly #misses = new Map<string, { n: number; since: number }>()
  #seq = 0
  #closed = false
  /** Probes sent so far. */
  sent = 0

  /**
   * `onGone(worker, why, since)`: `since` is when the first of the no-responder probes was sent (the
   * worker's subscriptions were gone then: nothing sent later can have reached it).
   */
  constructor(transport: Transport, onGone: (worker: string, why: string, since: number) => void, o: WorkerProbeOptions = {}) {
    this.#t = transport
    this.#onGone = onGone
    this.#confirmations = o.confirmations ?? 2
    this.#timeoutMs = o.timeoutMs ?? 1000
    this.#now = o.now ?? Date.now
    try {
      this.#inbox = transport.newInbox()
      this.#sub = transport.subscribe(`${this.#inbox}.>`)
      void consume(
        this.#sub,
        (m) => this.#answer(m.subject, m.noResponders === true),
        () => undefined,
      )
    } catch {
      this.#inbox = ''
      this.#sub = undefined // A transport without inboxes: no probes, heartbeats alone decide.
    }
  }

  /**
   * A worker was heard of (a heartbeat): probe it if it never answered a probe (at most every 5 s),
   * so that it can be judged by probes before it holds anything.
   */
  seen(worker: string): void {
    if (this.#answered.has(worker)) {
      return
    }
    const now = this.#now()
    const last = this.#learning.get(worker)
    if (last === undefined || now - last > LEARN_EVERY_MS) {
      this.#learning.set(worker, now)
      this.probe(worker)
    }
  }

  /** Probe `worker` unless a probe of it is in flight (or it cannot be probed). */
  probe(worker: string): void {
    if (this.#closed || this.#sub === undefined || this.#busy.has(worker) || !isSubjectToken(worker)) {
      return
    }
    const key = String(++this.#seq)
    this.#outstanding.set(key, { worker, sentAt: this.#now() })
    this.#busy.add(worker)
    this.sent++
    try {
      this.#t.publish(serviceSubject('PING', SERVICE_NAME, worker), new Uint8Array(0), { reply: `${this.#inbox}.${key}` })
    } catch {
      this.#settle(key)
    }
  }

  /** Forget probes unanswered for `timeoutMs` (called on each liveness check). */
  sweep(): void {
    const now = this.#now()
    for (const [key, o] of this.#outstanding) {
      if (now - o.sentAt > this.#timeoutMs) {
        this.#settle(key)
      }
    }
  }

  /** Forget a worker (it said bye, or was declared lost). */
  forget(worker: string): void {
    this.#misses.delete(worker)
    this.#answered.delete(worker)
    this.#learning.delete(worker)
  }

  /** Stop probing. Idempotent. */
  close(): void {
    if (this.#closed) {
      return
    }
    this.#closed = true
    this.#sub?.unsubscribe()
    this.#outstanding.clear()
    this.#busy.clear()
  }

  #settle(key: string): Outstanding | undefined {
    const o = this.#outstanding.get(key)
    if (o) {
      this.#outstanding.delete(key)
      this.#busy.delete(o.worker)
    }
    return o
  }

  #answer(subject: string, noResponders: boolean): void {
    const o = this.#settle(subject.slice(this.#inbox.length + 1))
    if (!o) {
      return
    }
    const w = o.worker
    if (!noResponders) {
      this.#answered.add(w)
      this.#learning.delete(w)
      this.#misses.delete(w)
      return
    }
    if (!this.#answered.has(w)) {
      return
    }
    const prev = this.#misses.get(w)
    const m = { n: (prev?.n ?? 0) + 1, since: prev?.since ?? o.sentAt }
    this.#misses.set(w, m)
    if (m.n >= this.#confirmations) {
      this.forget(w)
      this.#onGone(w, `worker ${w} is gone from NATS (no subscriber on its ${serviceSubject('PING', SERVICE_NAME, w)} subject, ${m.n} probes in a row)`, m.since)
    }
  }
}
