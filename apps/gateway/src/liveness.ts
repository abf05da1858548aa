import { decodeAccept, decodeHeartbeat, type Subjects, type WaitEstimate } from '@cohort/protocol'
import { WorkerWaits } from './wait-table.ts'
import { WorkerProbes } from './worker-probe.ts'
import { consume, type AbortSignalLike, type Transport, type TransportSubscription } from '@cohort/transport'

/**
 * Worker-loss detection of the gateway (docs/architecture.md#worker-loss). All durations in ms.
 */
export interface WorkerLossOptions {
  /** Heartbeats a worker may miss before the requests it holds fail (or are retried). @default 3 */
  missedHeartbeats?: number
  /**
   * Times a request marked safe to retry (`Idempotency-Key`, or an `id` in the body) is sent again to
   * another worker after its worker was lost, deadline permitting. @default 1
   */
  maxRetries?: number
  /**
   * A request no worker has accepted after this long counts as lost too (its message went to a
   * subscription whose worker is gone, or is cut off and not yet dropped by NATS), once workers
   * that send acceptance notices are seen. Longer than a heartbeat loss: a worker starved of CPU
   * (starting up on a busy machine) may take seconds to read its messages.
   * @default 10000
   */
  acceptTimeoutMs?: number
  /** How often the tracked requests are checked. @default 250 */
  checkIntervalMs?: number
  /**
   * Probe a worker that holds requests and has been silent for half its heartbeat interval on its
   * `$SRV.PING.cohort-worker.<id>` subject: two no-responder answers in a row (its connection is
   * gone: kill -9, OOM) lose its requests at once instead of after the missed heartbeats
   * (worker-probe.ts). @default true
   */
  probes?: boolean
  /** Clock, epoch ms (tests). @default Date.now */
  now?: () => number
}

/** Default heartbeats a worker may miss. */
export const DEFAULT_MISSED_HEARTBEATS = 3
/** Default wait for some worker to accept a request. */
export const DEFAULT_ACCEPT_TIMEOUT_MS = 3_000
/** Interval assumed for a worker whose heartbeat was not seen yet (the workers' default). */
const ASSUMED_INTERVAL_MS = 1000

/** One request in flight, as {@link WorkerLiveness.track} returns it. */
export interface TrackedRequest {
  /** Aborts when the client goes away (the signal given to track) or when the request is lost. */
  readonly signal: AbortSignalLike
  /** The id of the worker that accepted it, once known. */
  readonly worker: string | undefined
  /** Set when the request was declared lost: why. */
  readonly lost: string | undefined
  /**
   * True when it was lost before any worker accepted it: it (almost surely) never reached a
   * worker, so resending it cannot run it twice (in a NATS cluster, a request routed to a server
   * whose worker just left the queue group is dropped there).
   */
  readonly unaccepted: boolean
  /** Stop tracking (reply came, or gave up). Idempotent. */
  release(): void
}

/** One request in flight: the tracker's record and the caller's handle in one object. */
class Tracked implements TrackedRequest {
  worker: string | undefined = undefined
  lost: string | undefined = undefined
  readonly ctl = new LinkedAbort()
  #released = false
  readonly #signal: AbortSignalLike | undefined
  readonly #onAbort: (() => void) | undefined

  constructor(
    readonly id: string,
    public sentAt: number,
    readonly owner: WorkerLiveness,
    signal: AbortSignalLike | undefined,
  ) {
    if (signal?.aborted) {
      this.ctl.abort()
    } else if (signal) {
      this.#signal = signal
      this.#onAbort = () => this.ctl.abort()
      signal.addEventListener('abort', this.#onAbort, { once: true })
    }
  }

  get signal(): AbortSignalLike {
    return this.ctl
  }

  get unaccepted(): boolean {
    return this.lost !== undefined && this.worker === undefined
  }

  release(): void {
    if (this.#released) {
      return
    }
    this.#released = true
    if (this.#onAbort) {
      this.#signal?.removeEventListener('abort', this.#onAbort)
    }
    this.owner.forget(this)
  }
}

interface WorkerState {
  lastSeen: number
  intervalMs: number
  requests: Set<Tracked>
  /** Protocol version from its heartbeats (undefined until one arrived). */
  proto: number | undefined
}

/**
 * Tracks which worker holds each request in flight (from the workers' acceptance notices) and when
 * each worker was last heard of (heartbeats). When a worker holding requests misses
 * `missedHeartbeats` heartbeats, or a request is never accepted, the request's signal aborts with
 * `lost` set, so the caller answers at once (WORKER_LOST) or retries, instead of waiting for the
 * deadline. Pure: any {@link Transport}, an injected clock; its timer runs only while requests are
 * tracked.
 */
export class WorkerLiveness {
  /** Subject of this gateway's acceptance notices (the request envelope's `ack`). */
  readonly ackSubject: string
  /** This gateway instance's id (its acceptance subject and protocol-v2 inbox are named after it). */
  readonly gatewayId: string
  readonly missedHeartbeats: number
  readonly maxRetries: number
  readonly #acceptTimeoutMs: number
  readonly #checkMs: number
  readonly #now: () => number
  readonly #requests = new Map<string, Tracked>()
  readonly #workers = new Map<string, WorkerState>()
  readonly #subs: TransportSubscription[]
  readonly #probes: WorkerProbes | undefined
  #timer: ReturnType<typeof setInterval> | undefined
  #lastCheck: number | undefined
  /** Last time any worker's heartbeat arrived (0: never): acceptance timeouts apply only after one. */
  #lastHeartbeat = 0
  #closed = false
  /** Requests declared lost so far. */
  lostCount = 0
  /** The workers' queue-wait estimates per model (heartbeats, v2 accept notices): the door's worker-wait check reads them. */
  readonly waits: WorkerWaits

  constructor(transport: Transport, subjects: Subjects, gatewayId: string, o: WorkerLossOptions = {}) {
    this.missedHeartbeats = o.missedHeartbeats ?? DEFAULT_MISSED_HEARTBEATS
    this.maxRetries = o.maxRetries ?? 1
    this.#acceptTimeoutMs = o.acceptTimeoutMs ?? DEFAULT_ACCEPT_TIMEOUT_MS
    this.#checkMs = o.checkIntervalMs ?? 250
    this.#now = o.now ?? Date.now
    this.waits = new WorkerWaits(this.#now)
    if (!(this.missedHeartbeats >= 1) || !(this.maxRetries >= 0) || !(this.#acceptTimeoutMs > 0) || !(this.#checkMs > 0)) {
      throw new RangeError('workerLoss: missedHeartbeats >= 1, maxRetries >= 0, acceptTimeoutMs > 0 and checkIntervalMs > 0')
    }
    this.gatewayId = gatewayId
    this.ackSubject = subjects.accept(gatewayId)
    this.#subs = []
    this.#probes = o.probes === false ? undefined : new WorkerProbes(transport, (w, why, since) => this.#gone(w, why, since), { now: this.#now })
    const quiet = () => undefined // A bad notice is ignored; a refused subscription disables detection.
    try {
      const hb = transport.subscribe(subjects.heartbeat())
      this.#subs.push(hb)
      const acks = transport.subscribe(this.ackSubject)
      this.#subs.push(acks)
      void consume(hb, (m) => this.heartbeat(decodeHeartbeat(m.data)), quiet)
      void consume(acks, (m) => this.accepted(decodeAccept(m.data)), quiet)
    } catch {
      // A transport that cannot subscribe: no detection; requests wait for their deadline as before.
    }
  }

  /** Start tracking a request about to be sent; `signal` is the client's. */
  track(id: string, signal?: AbortSignalLike): TrackedRequest {
    const t = new Tracked(id, this.#now(), this, signal)
    this.#requests.set(id, t)
    this.#arm()
    return t
  }

  /** A worker's acceptance notice: it holds request `id`. */
  accepted(a: { id: string; worker: string }): void {
    this.acceptedAll([a.id], a.worker)
  }

  /** A pack's acceptance notice: `worker` holds every request of `ids` (one clock read, one lookup of the worker). */
  acceptedAll(ids: readonly string[], worker: string): void {
    let w: WorkerState | undefined
    for (const id of ids) {
      const t = this.#requests.get(id)
      if (!t || t.lost !== undefined || t.worker !== undefined) {
        continue
      }
      t.worker = worker
      w ??= this.#worker(worker)
      w.requests.add(t)
    }
    if (w !== undefined) {
      w.lastSeen = Math.max(w.lastSeen, this.#now())
    }
  }

  /** A worker's heartbeat; `bye` (drained) forgets it without failing anything. */
  heartbeat(h: { id: string; intervalMs: number; bye?: boolean; proto?: number; models?: Record<string, WaitEstimate> }): void {
    const now = this.#now()
    this.#lastHeartbeat = now
    if (h.bye) {
      this.waits.forget(h.id)
      this.#probes?.forget(h.id)
      const w = this.#workers.get(h.id)
      if (w && w.requests.size === 0) {
        this.#workers.delete(h.id)
      }
      return
    }
    const w = this.#worker(h.id)
    this.#probes?.seen(h.id) // Learn whether it answers probes before it holds anything.
    w.lastSeen = now
    w.intervalMs = h.intervalMs
    w.proto = h.proto ?? 1
    this.waits.heartbeat(h.id, h.intervalMs, h.models)
  }

  /**
   * The protocol version every worker heard from speaks (docs/protocol.md#version-negotiation-and-compatibility): the
   * lowest `proto` of the workers' heartbeats, 1 before any heartbeat arrived.
   */
  get protocol(): number {
    let v: number | undefined
    for (const w of this.#workers.values()) {
      if (w.proto !== undefined) {
        v = v === undefined ? w.proto : Math.min(v, w.proto)
      }
    }
    return v ?? 1
  }

  /** Fail the lost requests now (the timer calls it every `checkIntervalMs`). */
  check(): void {
    const now = this.#now()
    const gap = this.#lastCheck === undefined ? 0 : now - this.#lastCheck
    const stalled = gap > this.missedHeartbeats * ASSUMED_INTERVAL_MS
    this.#lastCheck = now
    // A check that runs late (this gateway's event loop was blocked or starved of CPU) was deaf
    // meanwhile: the heartbeats and notices of that time may still sit unread in its socket. That
    // deaf time does not count as the workers' silence (nor as waiting for an accept), so a gateway
    // paused for longer than a worker's loss window (3 x a 250 ms heartbeat) does not lose it.
    const deaf = gap - this.#checkMs
    if (!stalled && deaf > 0) {
      for (const w of this.#workers.values()) {
        w.lastSeen = Math.min(now, w.lastSeen + deaf)
      }
      for (const t of this.#requests.values()) {
        t.sentAt = Math.min(now, t.sentAt + deaf)
      }
    }
    if (stalled) {
      // This gateway's own event loop stalled: heartbeats may sit unread. Judge nobody this round.
      for (const w of this.#workers.values()) {
        w.lastSeen = Math.max(w.lastSeen, now)
      }
      for (const t of this.#requests.values()) {
        t.sentAt = Math.max(t.sentAt, now)
      }
      this.#idle()
      return
    }
    this.#probes?.sweep()
    for (const [id, w] of this.#workers) {
      const silentMs = now - w.lastSeen
      if (w.requests.size > 0 && silentMs > w.intervalMs / 2) {
        this.#probes?.probe(id)
      }
      if (silentMs > this.missedHeartbeats * w.intervalMs) {
        for (const t of [...w.requests]) {
          this.#lose(t, `worker ${id} sent no heartbeat for ${Math.round(silentMs)} ms while holding the request`)
        }
        if (silentMs > 10 * this.missedHeartbeats * w.intervalMs) {
          this.#workers.delete(id)
        }
      }
    }
    const acceptsExpected = this.#lastHeartbeat > 0 && now - this.#lastHeartbeat <= this.missedHeartbeats * ASSUMED_INTERVAL_MS * 10
    if (acceptsExpected) {
      for (const t of this.#requests.values()) {
        if (t.worker === undefined && t.lost === undefined && now - t.sentAt > this.#acceptTimeoutMs) {
          this.#lose(t, `no worker accepted the request within ${Math.round(this.#acceptTimeoutMs)} ms`)
        }
      }
    }
    this.#idle()
  }

  /** Stop the check timer when nothing is in flight (the next tracked request starts it again). */
  #idle(): void {
    if (this.#requests.size === 0) {
      this.#disarm()
    }
  }

  /** Requests in flight (tracked). */
  get inFlight(): number {
    return this.#requests.size
  }

  /** Stop listening; tracked requests are left alone. Idempotent. */
  close(): void {
    if (this.#closed) {
      return
    }
    this.#closed = true
    for (const s of this.#subs) {
      s.unsubscribe()
    }
    this.#probes?.close()
    this.#disarm()
  }

  #worker(id: string): WorkerState {
    let w = this.#workers.get(id)
    if (!w) {
      w = { lastSeen: this.#now(), intervalMs: ASSUMED_INTERVAL_MS, requests: new Set(), proto: undefined }
      this.#workers.set(id, w)
    }
    return w
  }

  /**
   * A probe found the worker's connection gone (since `since`): every request it holds is lost now,
   * and so is every request no worker accepted yet that was sent before `since` and has waited a
   * check interval: it may sit unread in the dead worker's socket (a live worker accepts on receipt).
   * Unaccepted, it is resent (upstream.ts) rather than left to its deadline.
   */
  #gone(id: string, why: string, since: number): void {
    for (const t of [...(this.#workers.get(id)?.requests ?? [])]) {
      this.#lose(t, why)
    }
    const now = this.#now()
    for (const t of [...this.#requests.values()]) {
      if (t.worker === undefined && t.lost === undefined && t.sentAt < since && now - t.sentAt >= this.#checkMs) {
        this.#lose(t, `${why}; no worker accepted the request, which was sent before`)
      }
    }
  }

  #lose(t: Tracked, why: string): void {
    t.lost = why
    this.lostCount++
    t.ctl.abort()
    this.forget(t)
  }

  /** Stop tracking `t` (its release, or its loss). */
  forget(t: Tracked): void {
    if (this.#requests.get(t.id) === t) {
      this.#requests.delete(t.id)
    }
    if (t.worker !== undefined) {
      this.#workers.get(t.worker)?.requests.delete(t)
    }
    // The check timer is not stopped here: a lone request after another (concurrency 1) would
    // start a new one every time; the next check that finds nothing in flight stops it.
  }

  #arm(): void {
    if (this.#timer === undefined && !this.#closed) {
      this.#lastCheck = this.#now()
      this.#timer = setInterval(() => this.check(), this.#checkMs)
      ;(this.#timer as { unref?: () => void }).unref?.()
    }
  }

  #disarm(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }
}

/**
 * The signal of a tracked request: aborted when its client's signal aborts or when it is lost. A
 * plain {@link AbortSignalLike}, not an AbortController (whose EventTarget signal costs about 1 %
 * of cohort serve's CPU when made per request, issue 28). Listeners run once, in order, at abort.
 */
class LinkedAbort implements AbortSignalLike {
  aborted = false
  #fns: (() => void)[] = []

  get signal(): AbortSignalLike {
    return this
  }

  addEventListener(_type: 'abort', fn: () => void): void {
    if (!this.aborted) {
      this.#fns.push(fn)
    }
  }

  removeEventListener(_type: 'abort', fn: () => void): void {
    const i = this.#fns.indexOf(fn)
    if (i >= 0) {
      this.#fns.splice(i, 1)
    }
  }

  abort(): void {
    if (this.aborted) {
      return
    }
    this.aborted = true
    for (const fn of this.#fns.splice(0)) {
      fn()
    }
  }
}
