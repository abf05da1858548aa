import {
  CohortError,
  decodeNotice,
  encodeRequest,
  MAX_PACK_REQUESTS,
  noticeFrom,
  packEncoded,
  type InferReply,
  type InferRequest,
  type Subjects,
  type TokenStep,
} from '@cohort/protocol'
import { consume, newReplyKey, type AbortSignalLike, type Transport, type TransportMessage } from '@cohort/transport'
import { Deadlines, monotonicNow } from '@cohort/batching'
import type { WorkerLiveness } from './liveness.ts'

/** Options of {@link Packer}. */
export interface PackerOptions {
  /**
   * Most requests in one pack. A pack goes to one worker, so this bounds how much work one message
   * hands a single worker while others may have room. @default 16
   */
  maxRequests?: number
  /** Most bytes in one pack; larger requests travel alone (protocol v1). @default 262144 (256 KiB) */
  maxBytes?: number
  /** The clock of the requests' deadlines (ms; tests). @default `performance.now` ({@link monotonicNow}) */
  now?: () => number
}

/** After this event-loop turn's I/O callbacks (setImmediate where the runtime has it: Node, Bun). */
const nextTurn: (fn: () => void) => void =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === 'function'
    ? (fn) => (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(fn)
    : (fn) => void setTimeout(fn, 0)

/** Default most requests in one pack. */
export const DEFAULT_PACK_REQUESTS = 16
/** Default most bytes in one pack. */
export const DEFAULT_PACK_BYTES = 256 * 1024

interface Entry {
  id: string
  /** The request encoded (buses that carry bytes), or itself (buses that carry values: in-process). */
  bytes: Uint8Array | undefined
  req: InferRequest | undefined
  /** Its size for the pack bound: the encoding's, or the tensor bytes of one carried as a value. */
  size: number
  model: string
  resolve: (r: InferReply) => void
  reject: (e: CohortError) => void
  /** False once settled (replied, expired, cancelled or failed). */
  live: boolean
  /** When it expires (the packer's clock, ms) and its place in the packer's {@link Deadlines}. */
  deadline: number
  heapIndex: number
  timeoutMs: number
  signal: AbortSignalLike | undefined
  onAbort: (() => void) | undefined
  pack: Pack | undefined
  /** Date.now() when its pack was published. */
  sentAt: number
  /** A streamed generation's token deltas (`tokens` notices), before its reply. */
  onDelta: ((s: TokenStep) => void) | undefined
}

interface Pack {
  seq: string
  /** The target: the model name, or `<model>\n<version>` for one version. */
  model: string
  entries: Entry[]
  open: number
  overflow: boolean
}

/**
 * The gateway's side of protocol v2 (docs/protocol.md#protocol-v2): the requests for one model that
 * arrive in the same event-loop turn leave in one NATS message (a pack, at most `maxRequests`),
 * published at the end of the turn (`setImmediate`, no timer) with a reply subject under this
 * gateway's inbox. The worker that takes a pack answers there with one acceptance notice and, per
 * batch, one message holding the replies of the pack's requests in that batch. Each request keeps
 * its own deadline, cancellation and worker-loss tracking (the acceptance notice feeds
 * {@link WorkerLiveness}).
 */
export class Packer {
  readonly maxRequests: number
  readonly maxBytes: number
  readonly #t: Transport
  readonly #s: Subjects
  readonly #lv: WorkerLiveness
  readonly #inbox: string
  /**
   * Reply subjects of this gateway's packs, `<inbox>.<key id>.<seq>`: the key, sent with each pack
   * to the workers only, proves the inbox is this gateway's (docs/security.md#replies-bound-to-their-gateway).
   */
  readonly #replyKey: { key: string; id: string } = newReplyKey()
  readonly #reply: string
  /** Requests waiting for the end of this turn, by model. */
  readonly #turn = new Map<string, Entry[]>()
  readonly #byId = new Map<string, Entry>()
  readonly #packs = new Map<string, Pack>()
  /** Every request's deadline, on one timer for the packer (no timer per request). */
  readonly #deadlines: Deadlines<Entry>
  readonly #now: () => number
  #seq = 0
  #scheduled = false
  #listening: boolean | undefined
  /** Packs and requests sent (for tests and metrics). */
  readonly sent = { packs: 0, requests: 0 }

  constructor(transport: Transport, subjects: Subjects, liveness: WorkerLiveness, o: PackerOptions = {}) {
    this.maxRequests = Math.min(MAX_PACK_REQUESTS, o.maxRequests ?? DEFAULT_PACK_REQUESTS)
    this.maxBytes = o.maxBytes ?? DEFAULT_PACK_BYTES
    if (!(this.maxRequests >= 1) || !(this.maxBytes >= 1)) {
      throw new RangeError('pack: maxRequests and maxBytes must be >= 1')
    }
    this.#t = transport
    this.#s = subjects
    this.#lv = liveness
    this.#inbox = `${subjects.inbox(liveness.gatewayId)}.`
    this.#reply = `${this.#inbox}${this.#replyKey.id}.`
    this.#now = o.now ?? monotonicNow
    this.#deadlines = new Deadlines<Entry>(
      (e) => this.#settle(e, new CohortError('DEADLINE_EXCEEDED', `no reply for request ${e.id} of model "${e.model}" within ${Math.round(e.timeoutMs)} ms`)),
      { now: this.#now },
    )
    // Replies published while this gateway's connection was between servers are dropped by NATS:
    // the requests in flight at the move that got no reply within the grace fail REPLY_LOST (503,
    // retried like a lost worker by Upstream) instead of waiting for their deadline.
    transport.onRepliesLost?.((movedAt) => {
      for (const e of [...this.#byId.values()]) {
        if (e.pack && e.sentAt <= movedAt) {
          this.#settle(
            e,
            new CohortError('REPLY_LOST', `the NATS connection moved to another server while request ${e.id} was in flight, and no reply came after it; retry`, { retryAfterS: 1 }),
          )
        }
      }
    })
  }

  /**
   * Whether `id` can go in a pack now: unique among requests in flight, small enough, and the inbox
   * subscription exists (made on first use; a transport that refuses it means protocol v1 only).
   */
  accepts(id: string, body: Uint8Array | number): boolean {
    if (this.#listening === undefined) {
      try {
        const sub = this.#t.subscribe(`${this.#inbox}>`)
        // A subscription the server ends (permissions: `cohort.gw.>` not allowed) means v1 from then on.
        void consume(
          sub,
          (m) => this.#onMessage(m),
          (_e, m) => {
            if (!m) {
              this.#listening = false
            }
          },
        )
        this.#listening = true
      } catch {
        this.#listening = false
      }
    }
    const size = typeof body === 'number' ? body : body.byteLength
    return this.#listening && size <= this.maxBytes - 16 && !this.#byId.has(id)
  }

  /**
   * Send one request (encoded without `ack`; or the request itself on a bus that carries values,
   * `Transport.publishValue`, sized by `size`) in this turn's pack for `model`; resolves with
   * its reply. Rejects with CohortError: DEADLINE_EXCEEDED after `timeoutMs`, CANCELLED when
   * `signal` aborts, NO_WORKER when no worker listens on the model's subjects, INTERNAL when the
   * worker's answer is unreadable. `onDelta` receives a streamed generation's token deltas, in
   * order, before the reply resolves.
   */
  send(
    model: string,
    id: string,
    body: Uint8Array | InferRequest,
    timeoutMs: number,
    signal: AbortSignalLike | undefined,
    version?: string,
    onDelta?: (s: TokenStep) => void,
    size?: number,
  ): Promise<InferReply> {
    const bytes = body instanceof Uint8Array ? body : undefined
    const target = version === undefined ? model : `${model}\n${version}`
    return new Promise<InferReply>((resolve, reject) => {
      if (signal?.aborted) {
        reject(new CohortError('CANCELLED', 'request aborted'))
        return
      }
      const e: Entry = {
        id,
        bytes,
        req: bytes ? undefined : (body as InferRequest),
        size: bytes ? bytes.byteLength : (size ?? 0),
        model,
        resolve,
        reject,
        live: true,
        deadline: this.#now() + Math.max(1, timeoutMs),
        heapIndex: -1,
        timeoutMs,
        signal,
        onAbort: undefined,
        pack: undefined,
        sentAt: 0,
        onDelta,
      }
      this.#deadlines.add(e)
      if (signal) {
        e.onAbort = () => this.#settle(e, new CohortError('CANCELLED', 'request aborted'))
        signal.addEventListener('abort', e.onAbort, { once: true })
      }
      this.#byId.set(id, e)
      let q = this.#turn.get(target)
      if (!q) {
        q = []
        this.#turn.set(target, q)
      }
      q.push(e)
      if (!this.#scheduled) {
        this.#scheduled = true
        nextTurn(() => this.#flush())
      }
    })
  }

  /** Requests in flight. */
  get inFlight(): number {
    return this.#byId.size
  }

  #flush(): void {
    this.#scheduled = false
    for (const [model, q] of this.#turn) {
      // Delete, never `clear()`: V8's Map.clear() links the old table to its replacement, and an old
      // table that reached the old generation then keeps every later table, and the requests they
      // held, alive through young-generation GCs (docs/bench/gc-2026-12-03.md).
      this.#turn.delete(model)
      let pack: Entry[] = []
      let size = 0
      for (const e of q) {
        if (!e.live) {
          continue // settled (aborted) before the turn ended
        }
        if (pack.length >= this.maxRequests || (pack.length > 0 && size + e.size > this.maxBytes)) {
          this.#publish(model, pack, false)
          pack = []
          size = 0
        }
        pack.push(e)
        size += e.size
      }
      if (pack.length > 0) {
        this.#publish(model, pack, false)
      }
    }
  }

  #publish(model: string, entries: Entry[], overflow: boolean): void {
    const seq = (this.#seq++).toString(36)
    const p: Pack = { seq, model, entries, open: entries.length, overflow }
    this.#packs.set(seq, p)
    const now = Date.now()
    for (const e of entries) {
      e.pack = p
      e.sentAt = now
    }
    this.sent.packs++
    this.sent.requests += entries.length
    const subject = this.#subject(model, overflow)
    const opts = { reply: this.#reply + seq, replyKey: this.#replyKey.key }
    try {
      const bytesOf = (e: Entry): Uint8Array => {
        if (e.bytes) {
          return e.bytes
        }
        if (!e.req) {
          throw new Error(`request ${e.id} has neither bytes nor a value`)
        }
        return encodeRequest(e.req)
      }
      if (this.#t.publishValue && entries.every((e) => e.req)) {
        // In-process: the requests themselves, no encode or decode (the worker checks them as a decode would).
        const value = { v: 2, reqs: entries.map((e) => e.req) }
        this.#t.publishValue(subject, { value, encode: () => packEncoded(entries.map(bytesOf)) }, opts)
      } else {
        this.#t.publish(subject, packEncoded(entries.map(bytesOf)), opts)
      }
    } catch (err) {
      this.#packs.delete(seq)
      const ce = err instanceof CohortError ? err : new CohortError('NO_WORKER', `NATS publish failed: ${err instanceof Error ? err.message : String(err)}`)
      for (const e of entries) {
        this.#settle(e, ce)
      }
    }
  }

  /** The subject of a target (`model` or `model\nversion`). */
  #subject(target: string, overflow: boolean): string {
    const nl = target.indexOf('\n')
    const model = nl < 0 ? target : target.slice(0, nl)
    const version = nl < 0 ? undefined : target.slice(nl + 1)
    return overflow ? this.#s.overflow(model, version) : this.#s.infer(model, version)
  }

  #onMessage(m: TransportMessage): void {
    if (!m.subject.startsWith(this.#reply)) {
      return // not a pack's reply subject (a probe of the inbox, another key)
    }
    const seq = m.subject.slice(this.#reply.length)
    const p = this.#packs.get(seq)
    if (!p) {
      return // every request of the pack settled already (late answer)
    }
    if (m.noResponders) {
      this.#packs.delete(seq)
      const left = p.entries.filter((e) => e.live && e.pack === p)
      if (left.length === 0) {
        return
      }
      if (!p.overflow) {
        // No worker with spare capacity listens on the main subject: every worker listens on the
        // overflow subject and queues there (up to its bound).
        this.#publish(p.model, left, true)
        return
      }
      for (const e of left) {
        this.#settle(e, new CohortError('NO_WORKER', `no responders on ${this.#subject(p.model, true)}`))
      }
      return
    }
    let n
    try {
      n = m.value !== undefined ? noticeFrom(m.value) : decodeNotice(m.data)
    } catch (err) {
      this.#packs.delete(seq)
      const ce = new CohortError('INTERNAL', `a worker sent an unreadable reply: ${err instanceof Error ? err.message : 'decode failed'}`)
      for (const e of p.entries) {
        if (e.pack === p) {
          this.#settle(e, ce)
        }
      }
      return
    }
    if (n.t === 'accept') {
      this.#lv.acceptedAll(n.ids, n.worker)
      this.#lv.waits.accepted(p.model, n.worker, n) // the door's worker-wait check (wait-check.ts)
      return
    }
    if (n.t === 'tokens') {
      // Never answered: its reply subject is the worker's watch inbox, where NATS sends a
      // no-responders status once this gateway no longer subscribes (docs/generative.md#streaming-over-nats).
      for (const step of n.steps) {
        const e = this.#byId.get(step.id)
        if (e && e.pack === p) {
          e.onDelta?.(step)
        }
      }
      return
    }
    for (const r of n.replies) {
      const e = this.#byId.get(r.id)
      if (e && e.pack === p) {
        this.#settle(e, r)
      }
    }
  }

  #settle(e: Entry, outcome: CohortError | InferReply): void {
    if (!e.live) {
      return
    }
    e.live = false
    this.#deadlines.remove(e)
    if (e.onAbort) {
      e.signal?.removeEventListener('abort', e.onAbort)
    }
    if (this.#byId.get(e.id) === e) {
      this.#byId.delete(e.id)
    }
    const p = e.pack
    if (p && --p.open === 0 && this.#packs.get(p.seq) === p) {
      this.#packs.delete(p.seq)
    }
    const { resolve, reject } = e
    // A settled entry lets go of what it held: its pack (and so its entry) may already be in the
    // old generation, and a dead old object keeps what it points to alive through scavenges.
    e.req = undefined
    e.bytes = undefined
    e.signal = undefined
    e.onAbort = undefined
    e.onDelta = undefined
    if (outcome instanceof CohortError) {
      reject(outcome)
    } else {
      resolve(outcome)
    }
  }
}
