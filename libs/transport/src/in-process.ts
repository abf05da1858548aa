import { CohortError } from '@cohort/protocol'
import { AsyncQueue } from './async-queue.ts'
import type {
  CarriedValue,
  PublishOptions,
  ConfigStore,
  ModelConfig,
  ModelDirectory,
  RequestOptions,
  SubscribeOptions,
  Transport,
  TransportMessage,
  TransportSubscription,
} from './types.ts'

/** Default max message size of the in-process bus (64 MiB, like NATS's hard ceiling). */
export const IN_PROCESS_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

interface LocalSub {
  queue: string | undefined
  q: AsyncQueue<TransportMessage>
  draining: boolean
}

/**
 * A bus inside one process with NATS semantics: exact subjects, queue groups (round robin),
 * no-responders errors, request timeouts. Used by the embedded `cohort serve` and by tests.
 */
export class InProcessTransport implements Transport {
  readonly maxMessageBytes: number
  readonly #subs = new Map<string, LocalSub[]>()
  /** Subjects' receivers, computed on first delivery; cleared whenever a subscription comes or goes. */
  readonly #routes = new Map<string, Route>()
  readonly #rr = new Map<string, number>()
  readonly #known = new Set<string>()
  readonly #configs = new Map<string, ModelConfig>()
  readonly #watchers = new Map<string, Set<(v: ModelConfig) => void>>()
  #closed = false
  #inboxes = 0

  constructor(opts: { maxMessageBytes?: number } = {}) {
    this.maxMessageBytes = opts.maxMessageBytes ?? IN_PROCESS_MAX_MESSAGE_BYTES
  }

  readonly directory: ModelDirectory = {
    announce: (model) => {
      this.#known.add(model)
      return Promise.resolve()
    },
    known: (model) => Promise.resolve(this.#known.has(model)),
  }

  readonly config: ConfigStore = {
    get: (model) => Promise.resolve(this.#configs.get(model)),
    put: (model, value) => {
      this.#configs.set(model, value)
      for (const fn of this.#watchers.get(model) ?? []) {
        queueMicrotask(() => fn(value))
      }
      return Promise.resolve()
    },
    delete: (model) => {
      this.#configs.delete(model)
      for (const fn of this.#watchers.get(model) ?? []) {
        queueMicrotask(() => fn({}))
      }
      return Promise.resolve()
    },
    watch: (model, onChange) => {
      const set = this.#watchers.get(model) ?? new Set()
      set.add(onChange)
      this.#watchers.set(model, set)
      const current = this.#configs.get(model)
      if (current) {
        queueMicrotask(() => onChange(current))
      }
      return { stop: () => void set.delete(onChange) }
    },
  }

  request(subject: string, data: Uint8Array, opts: RequestOptions): Promise<Uint8Array> {
    if (this.#closed) {
      return Promise.reject(new CohortError('SHUTTING_DOWN', 'transport is closed'))
    }
    if (data.byteLength > this.maxMessageBytes) {
      return Promise.reject(new CohortError('PAYLOAD_TOO_LARGE', `message of ${data.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${this.maxMessageBytes} bytes`))
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      let done = false
      const finish = (fn: () => void) => {
        if (!done) {
          done = true
          clearTimeout(timer)
          opts.signal?.removeEventListener('abort', onAbort)
          fn()
        }
      }
      const onAbort = () => finish(() => reject(new CohortError('CANCELLED', 'request aborted')))
      const timer = setTimeout(
        () => finish(() => reject(new CohortError('DEADLINE_EXCEEDED', `no reply on ${subject} within ${Math.round(opts.timeoutMs)} ms`))),
        Math.max(0, opts.timeoutMs),
      )
      if (opts.signal?.aborted) {
        onAbort()
        return
      }
      opts.signal?.addEventListener('abort', onAbort, { once: true })
      const msg: TransportMessage = {
        subject,
        data,
        respond: (reply) => {
          if (done) {
            return false
          }
          finish(() => resolve(reply))
          return true
        },
      }
      if (this.#deliver(subject, msg) === 0) {
        finish(() => reject(new CohortError('NO_WORKER', `no responders on ${subject}`)))
      }
    })
  }

  /**
   * Every subscriber's reply. The bus knows how many received the message, so it answers as soon
   * as each of them replied (NATS cannot know and waits `timeoutMs`), or at `timeoutMs` with the
   * replies so far.
   */
  requestAll(subject: string, data: Uint8Array, opts: { timeoutMs: number }): Promise<Uint8Array[]> {
    const replies: Uint8Array[] = []
    let receivers = Number.POSITIVE_INFINITY
    let done: (() => void) | undefined
    const msg: TransportMessage = {
      subject,
      data,
      respond: (r) => {
        if (done === undefined && receivers !== Number.POSITIVE_INFINITY) {
          return false
        }
        replies.push(r)
        if (replies.length >= receivers) {
          done?.()
        }
        return true
      },
    }
    receivers = this.#deliver(subject, msg, true)
    if (receivers === 0 || replies.length >= receivers) {
      return Promise.resolve(replies)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => done?.(), opts.timeoutMs)
      done = () => {
        done = undefined
        clearTimeout(timer)
        resolve(replies)
      }
    })
  }

  newInbox(): string {
    return `_INBOX.local${(this.#inboxes++).toString(36)}`
  }

  publish(subject: string, data: Uint8Array, opts: PublishOptions = {}): void {
    if (this.#closed) {
      return
    }
    const reply = opts.reply
    if (reply === undefined) {
      this.#deliver(subject, { subject, data, respond: () => false })
      return
    }
    const msg: TransportMessage = {
      subject,
      data,
      reply,
      respond: (d) => {
        this.publish(reply, d)
        return true
      },
    }
    if (this.#deliver(subject, msg) === 0) {
      // Like NATS's no-responders status: an empty message on the reply subject, a little later.
      queueMicrotask(() => this.#deliver(reply, { subject: reply, data: new Uint8Array(0), noResponders: true, respond: () => false }))
    }
  }

  /**
   * {@link publish} without encoding: receivers get `body.value` itself as `value` (and its
   * encoding as `data` only if they read it). Answers with `respondValue` are carried the same way.
   */
  publishValue(subject: string, body: CarriedValue, opts: PublishOptions = {}): void {
    if (this.#closed) {
      return
    }
    const reply = opts.reply
    const respondValue = reply === undefined ? () => false : (b: CarriedValue) => (this.publishValue(reply, b), true)
    const respond = reply === undefined ? () => false : (d: Uint8Array) => (this.publish(reply, d), true)
    const msg = carried(subject, body, respond, respondValue, reply)
    if (this.#deliver(subject, msg) === 0 && reply !== undefined) {
      queueMicrotask(() => this.#deliver(reply, { subject: reply, data: new Uint8Array(0), noResponders: true, respond: () => false }))
    }
  }

  subscribe(subject: string, opts: SubscribeOptions = {}): TransportSubscription {
    const sub: LocalSub = { queue: opts.queue, q: new AsyncQueue(), draining: false }
    const list = this.#subs.get(subject) ?? []
    list.push(sub)
    this.#subs.set(subject, list)
    this.#routes.clear()
    const remove = () => {
      const l = this.#subs.get(subject)
      if (l) {
        const i = l.indexOf(sub)
        if (i >= 0) {
          l.splice(i, 1)
          this.#routes.clear()
        }
      }
    }
    return {
      [Symbol.asyncIterator]: () => sub.q,
      listen: (fn) => sub.q.listen(fn),
      unsubscribe: () => {
        remove()
        sub.q.end(true)
      },
      drain: () => {
        remove()
        sub.q.end(false)
        return Promise.resolve()
      },
    }
  }

  close(): Promise<void> {
    this.#closed = true
    for (const l of this.#subs.values()) {
      for (const s of l) {
        s.q.end(false)
      }
    }
    this.#subs.clear()
    this.#routes.clear()
    return Promise.resolve()
  }

  /** Deliver to every plain subscriber and one member per queue group; returns receivers. */
  #deliver(subject: string, msg: TransportMessage, all = false): number {
    const r = this.#route(subject)
    let n = 0
    if (all) {
      for (const s of r.all) {
        n += s.q.push(msg) ? 1 : 0
      }
      return n
    }
    for (const s of r.plain) {
      n += s.q.push(msg) ? 1 : 0
    }
    for (const [name, g] of r.groups) {
      const i = (this.#rr.get(name) ?? 0) % g.length
      this.#rr.set(name, i + 1)
      n += g[i]?.q.push(msg) ? 1 : 0
    }
    return n
  }

  /**
   * The subscriptions a subject reaches, exact and `prefix.>` at any depth (the gateway's inbox:
   * `<inbox>.<key id>.<seq>`), grouped once until the subscriptions change: per subject for a
   * subject with a subscription of its own (the model subjects), per wildcard for one that only a
   * single `prefix.>` reaches (reply subjects, one per pack: the cache stays as small as the
   * subscriptions, and a reply costs the lookups, not a new route).
   */
  #route(subject: string): Route {
    const hit = this.#routes.get(subject)
    if (hit !== undefined) {
      return hit
    }
    const own = this.#subs.get(subject)
    let list = own ?? []
    let onlyWild: string | undefined
    let wilds = 0
    for (let dot = subject.lastIndexOf('.'); dot > 0; dot = subject.lastIndexOf('.', dot - 1)) {
      const key = `${subject.slice(0, dot)}.>`
      const wild = this.#subs.get(key)
      if (wild && wild.length > 0) {
        list = [...list, ...wild]
        onlyWild = key
        wilds++
      }
    }
    // Keyed apart from subjects (a NUL never occurs in one), so a subject named `a.>` is not confused with it.
    const key = own !== undefined ? subject : wilds === 1 ? `\u0000${onlyWild}` : undefined
    if (key !== undefined && key !== subject) {
      const wildHit = this.#routes.get(key)
      if (wildHit !== undefined) {
        return wildHit
      }
    }
    const plain: LocalSub[] = []
    const groups = new Map<string, LocalSub[]>()
    for (const s of list) {
      if (s.queue === undefined) {
        plain.push(s)
      } else {
        const g = groups.get(s.queue) ?? []
        g.push(s)
        groups.set(s.queue, g)
      }
    }
    const r: Route = { all: [...list], plain, groups: [...groups] }
    if (key !== undefined) {
      this.#routes.set(key, r)
    }
    return r
  }
}

/** Where one subject's messages go (InProcessTransport's route cache). */
interface Route {
  all: LocalSub[]
  plain: LocalSub[]
  groups: [string, LocalSub[]][]
}

/** A message carrying a value: `data` is its encoding, made on first read only. */
function carried(
  subject: string,
  body: CarriedValue,
  respond: (d: Uint8Array) => boolean,
  respondValue: (b: CarriedValue) => boolean,
  reply: string | undefined,
): TransportMessage {
  return new CarriedMessage(subject, body, respond, respondValue, reply)
}

/** One class for every carried message: no getter or spread made per message. */
class CarriedMessage implements TransportMessage {
  readonly value: unknown
  readonly #body: CarriedValue
  #bytes: Uint8Array | undefined
  constructor(
    readonly subject: string,
    body: CarriedValue,
    readonly respond: (d: Uint8Array) => boolean,
    readonly respondValue: (b: CarriedValue) => boolean,
    readonly reply: string | undefined,
  ) {
    this.value = body.value
    this.#body = body
  }

  get data(): Uint8Array {
    return (this.#bytes ??= this.#body.encode())
  }
}
