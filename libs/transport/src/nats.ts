import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { createInbox, headers, NoRespondersError, RequestError, TimeoutError } from '@nats-io/nats-core'
import { Kvm, type KV } from '@nats-io/kv'
import { CohortError, DEFAULT_INBOX_PREFIX, DEFAULT_SUBJECT_PREFIX, kvBuckets } from '@cohort/protocol'
import { AsyncQueue } from './async-queue.ts'
import { InflightBudget, type InflightLimits } from './inflight.ts'
import { LargeMessages, type LargeMessageOptions } from './nats-large.ts'
import { ReconnectGuard } from './reconnect-guard.ts'
import { REPLY_KEY_HEADER, ReplyGuard, type ReplyRefusal } from './reply-guard.ts'
import type {
  ConfigStore,
  ModelConfig,
  ModelDirectory,
  RequestOptions,
  SubscribeOptions,
  Transport,
  TransportMessage,
  TransportSubscription,
} from './types.ts'

/** KV bucket where workers announce the models they serve (default prefix; see `kvBuckets`). */
export const MODELS_BUCKET = kvBuckets(DEFAULT_SUBJECT_PREFIX).models

/** KV bucket holding each model's runtime configuration (default prefix; see `kvBuckets`). */
export const CONFIG_BUCKET = kvBuckets(DEFAULT_SUBJECT_PREFIX).config

function mapRequestError(e: unknown, subject: string, timeoutMs: number): CohortError {
  if (e instanceof CohortError) {
    return e
  }
  const cause = e instanceof Error ? e.cause : undefined
  if (
    e instanceof NoRespondersError ||
    cause instanceof NoRespondersError ||
    (e instanceof RequestError && e.isNoResponders())
  ) {
    return new CohortError('NO_WORKER', `no responders on ${subject}`, { cause: e })
  }
  if (e instanceof TimeoutError || cause instanceof TimeoutError) {
    return new CohortError('DEADLINE_EXCEEDED', `no reply on ${subject} within ${Math.round(timeoutMs)} ms`, { cause: e })
  }
  const msg = e instanceof Error ? e.message : String(e)
  if (/max_payload/i.test(msg)) {
    return new CohortError('PAYLOAD_TOO_LARGE', msg, { cause: e })
  }
  return new CohortError('NO_WORKER', `NATS request failed: ${msg}`, { cause: e })
}

/** Options of {@link createNatsTransport}. */
export interface NatsTransportOptions extends LargeMessageOptions {
  /** Drain and close the connection in `close()`. @default false */
  ownsConnection?: boolean
  /**
   * Subject prefix of the deployment (the gateway's and worker's `subjectPrefix`): the KV buckets
   * are `<prefix>-models` and `<prefix>-config` (`kvBuckets`), so deployments with different
   * prefixes on one NATS server keep apart. @default 'cohort' (`cohort-models`, `cohort-config`)
   */
  subjectPrefix?: string
  /**
   * Bounds on the requests received on `bounded` subscriptions (a worker's model subjects) and their
   * bytes, chunked messages counted at their full size, from arrival until answered. Past them a
   * request is refused with 503 OVERLOADED (and a large one is never pulled). `false`: no bound.
   * @default {} (1024 requests, 256 MiB)
   */
  inflight?: InflightLimits | false
  /**
   * Replicas of the KV buckets (`<prefix>-models`, `<prefix>-config`) when this process creates them;
   * an existing bucket is opened as it is. Use 3 on a 3-node JetStream cluster. @default 1
   */
  kvReplicas?: number
  /**
   * After the connection moved to another server (restart, lame-duck mode), how long a request
   * that was in flight across the move waits for its reply before it fails with REPLY_LOST (503):
   * replies published during the move are dropped by NATS. 0 waits for the deadline. @default 5000
   */
  reconnectReplyGraceMs?: number
  /**
   * Replies go only to the requesters' inboxes under this prefix (nats.js `inboxPrefix`), in the
   * form a client makes them (`<prefix>.<nuid>[.<token>]`): a request whose reply subject lies
   * elsewhere (`$KV.…`, `$JS.…`, another service's subject) is answered by nobody, chunk requests
   * included, so no requester can make this process publish where it alone may
   * (docs/security.md#no-confused-deputy, `reply-guard.ts`). Protocol v2 gateway inboxes
   * (`<subjectPrefix>.gw.…`) are accepted on `replies: 'pack'` subscriptions only, and only with
   * the pack's reply key. @default '_INBOX'
   */
  replyInboxPrefix?: string
  /**
   * Told of each message left unanswered because its reply subject is not provably the asker's
   * (reply-guard.ts), to log it. Called synchronously; throttle there. @default none
   */
  onReplyRefused?: (refusal: ReplyRefusal) => void
}

/**
 * A {@link Transport} over a NATS connection. Works with nats-server 2.9.10 and newer.
 * The connection stays owned by the caller unless `ownsConnection` is set.
 *
 * Messages larger than the server's `max_payload` (requests, replies, publications) travel
 * transparently, up to `maxMessageBytes` (64 MiB by default): the sender keeps the bytes and sends
 * a reference; the receiver pulls them in chunks over core NATS request-reply (no JetStream).
 * `maxMessageBytes` reports that bound.
 * @see docs/protocol.md#large-messages
 */
export function createNatsTransport(nc: NatsConnection, opts: NatsTransportOptions = {}): Transport {
  const inbox = opts.replyInboxPrefix ?? DEFAULT_INBOX_PREFIX
  // The one reply-subject check of every responder of this transport (chunks included).
  const replies = new ReplyGuard({
    inboxPrefix: inbox,
    subjectPrefix: opts.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX,
    ...(opts.onReplyRefused ? { onRefused: opts.onReplyRefused } : {}),
  })
  const large = new LargeMessages(nc, opts, replies)
  const guard = new ReconnectGuard(nc, opts.reconnectReplyGraceMs)
  const replicas = opts.kvReplicas ?? 1
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) {
    throw new RangeError(`kvReplicas must be an integer from 1 to 5, got ${String(opts.kvReplicas)}`)
  }
  const budget = opts.inflight === false ? undefined : new InflightBudget(opts.inflight ?? {})
  const names = kvBuckets(opts.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
  let kv: Promise<KV | undefined> | undefined
  const bucket = (create: boolean): Promise<KV | undefined> => {
    kv ??= (create ? new Kvm(nc).create(names.models, { history: 1, replicas }) : new Kvm(nc).open(names.models)).catch(
      () => {
        kv = undefined // JetStream off or bucket missing: try again next time.
        return undefined
      },
    )
    return kv
  }
  const directory: ModelDirectory = {
    announce: async (model, info) => {
      const b = await bucket(true)
      await b?.put(model, info).catch(() => undefined)
    },
    known: async (model) => {
      const b = await bucket(false)
      if (!b) {
        return undefined
      }
      const e = await b.get(model).catch(() => null)
      return e !== null && e.operation === 'PUT'
    },
  }
  let cfg: Promise<KV | undefined> | undefined
  const configBucket = (): Promise<KV | undefined> => {
    cfg ??= new Kvm(nc).create(names.config, { history: 1, replicas }).catch(() => {
      cfg = undefined
      return undefined
    })
    return cfg
  }
  const config: ConfigStore = {
    async get(model) {
      const b = await configBucket()
      const e = await b?.get(model).catch(() => null)
      return e && e.operation === 'PUT' ? (e.json() as ModelConfig) : undefined
    },
    async put(model, value) {
      const b = await configBucket()
      if (!b) {
        throw new CohortError('NOT_READY', 'runtime configuration needs NATS JetStream (start nats-server with -js)')
      }
      await b.put(model, JSON.stringify(value))
    },
    async delete(model) {
      const b = await configBucket()
      if (!b) {
        throw new CohortError('NOT_READY', 'runtime configuration needs NATS JetStream (start nats-server with -js)')
      }
      await b.delete(model)
    },
    watch(model, onChange) {
      let stopped = false
      let iter: { stop(): void } | undefined
      void (async () => {
        const b = await configBucket()
        if (!b || stopped) {
          return
        }
        const w = await b.watch({ key: model }).catch(() => undefined)
        if (!w) {
          return
        }
        iter = w
        if (stopped) {
          w.stop()
          return
        }
        for await (const e of w) {
          if (e.operation === 'PUT' || e.operation === 'DEL' || e.operation === 'PURGE') {
            try {
              onChange(e.operation === 'PUT' ? (e.json() as ModelConfig) : {})
            } catch {
              // A bad stored value must not end the watch.
            }
          }
        }
      })()
      return {
        stop: () => {
          stopped = true
          iter?.stop()
        },
      }
    },
  }
  let closing: Promise<void> | undefined
  return {
    config,
    get maxMessageBytes() {
      return large.maxBytes
    },
    directory,
    async request(subject, data, o: RequestOptions) {
      const max = large.maxBytes
      if (data.byteLength > max) {
        throw new CohortError(
          'PAYLOAD_TOO_LARGE',
          `encoded request of ${data.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${max} bytes`,
        )
      }
      if (o.signal?.aborted) {
        throw new CohortError('CANCELLED', 'request aborted')
      }
      const timeout = Math.max(1, o.timeoutMs)
      const started = Date.now()
      // Too large for one message: keep it here until the request settles; the receiver pulls it.
      const blob = large.isLarge(data) ? large.offer(data, timeout) : undefined
      const p = (async () => {
        const m = blob
          ? await nc.request(subject, new Uint8Array(0), { timeout, headers: blob.headers })
          : await nc.request(subject, data, { timeout })
        return large.isRef(m) ? large.body(m, Math.max(1, timeout - (Date.now() - started))) : m.data
      })()
      let onAbort: (() => void) | undefined
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(new CohortError('CANCELLED', 'request aborted'))
        o.signal?.addEventListener('abort', onAbort, { once: true })
      })
      const moved = guard.watch(subject)
      try {
        return await Promise.race(o.signal ? [p, aborted, moved.lost] : [p, moved.lost])
      } catch (e) {
        throw mapRequestError(e, subject, o.timeoutMs)
      } finally {
        moved.release()
        if (blob) {
          large.forget(blob.id)
        }
        p.catch(() => undefined)
        aborted.catch(() => undefined)
        if (onAbort) {
          o.signal?.removeEventListener('abort', onAbort)
        }
      }
    },
    async requestAll(subject, data, o) {
      const out: Uint8Array[] = []
      try {
        const it = await nc.requestMany(subject, data, { maxWait: o.timeoutMs })
        for await (const m of it) {
          const d = large.isRef(m) ? await large.body(m, o.timeoutMs).catch(() => undefined) : m.data
          if (d && d.byteLength > 0) {
            out.push(d)
          }
        }
      } catch {
        // No responders or timeout: whatever arrived is the answer.
      }
      return out
    },
    onRepliesLost: (fn) => guard.onMoved(fn),
    // Under replyInboxPrefix: what the other side accepts as a reply subject.
    newInbox: () => createInbox(inbox),
    publish(subject, data, po) {
      const reply = po?.reply
      const keyed = (h: ReturnType<typeof headers> | undefined) => {
        if (po?.replyKey === undefined) {
          return h
        }
        const out = h ?? headers()
        out.set(REPLY_KEY_HEADER, po.replyKey)
        return out
      }
      if (large.isLarge(data) && data.byteLength <= large.maxBytes) {
        nc.publish(subject, new Uint8Array(0), { headers: keyed(large.offer(data).headers), ...(reply ? { reply } : {}) })
      } else {
        const h = keyed(undefined)
        nc.publish(subject, data, reply || h ? { ...(reply ? { reply } : {}), ...(h ? { headers: h } : {}) } : undefined)
      }
    },
    subscribe(subject, so: SubscribeOptions = {}): TransportSubscription {
      const sub = nc.subscribe(subject, so.queue ? { queue: so.queue } : {})
      const bound = so.bounded ? budget : undefined
      const cls = so.replies ?? 'inbox'
      // `held`: bytes counted against the in-flight bound, given back with the (first) answer.
      const wrap = (m: Msg, data: Uint8Array, held: number | undefined): TransportMessage => {
        const t: { subject: string; data: Uint8Array; respond: (d: Uint8Array) => boolean; reply?: string; noResponders?: boolean } = {
          subject: m.subject,
          data,
          respond: (d) => {
            if (held !== undefined) {
              bound?.release(held)
              held = undefined
            }
            return large.respond(m, d)
          },
        }
        if (m.reply) {
          t.reply = m.reply
        }
        if (data.byteLength === 0 && m.headers?.code === 503) {
          t.noResponders = true
        }
        return t
      }
      // Plain messages pass in order; a large one joins once pulled, without holding up the rest.
      const q = new AsyncQueue<TransportMessage>()
      let pulling = 0
      let ended = false
      let failure: unknown
      const settle = (): void => {
        if (ended && pulling === 0) {
          q.end()
        }
      }
      void (async () => {
        try {
          for await (const m of sub) {
            if (m.reply && !replies.allows(m.reply, cls, m.headers?.get(REPLY_KEY_HEADER) || undefined, m.subject)) {
              continue // Not provably the asker's: drop it unread and unanswered (reply-guard.ts).
            }
            const held = bound && m.reply ? large.sizeOf(m) : undefined
            if (held !== undefined && held > bound!.maxBytes) {
              // Never servable here: a 4xx naming the bound, not a retry.
              LargeMessages.refuse(m, new CohortError('PAYLOAD_TOO_LARGE', `message of ${held} bytes exceeds the worker's in-flight bytes bound (inflight.maxBytes) of ${bound!.maxBytes} bytes`))
              continue
            }
            if (held !== undefined && !bound!.tryAdmit(held)) {
              LargeMessages.refuse(m, new CohortError('OVERLOADED', `the worker is at its in-flight bound: ${bound!.describe()}; retry later`, { retryAfterS: 1 }))
              continue
            }
            if (!large.isRef(m)) {
              q.push(wrap(m, m.data, held))
              continue
            }
            pulling++
            large
              .body(m)
              .then(
                (d) => q.push(wrap(m, d, held)),
                (e: unknown) => {
                  if (held !== undefined) {
                    bound?.release(held)
                  }
                  LargeMessages.refuse(m, e)
                },
              )
              .finally(() => {
                pulling--
                settle()
              })
              .catch(() => undefined)
          }
        } catch (e) {
          failure = e
        }
        ended = true
        settle()
      })()
      async function* iterate(): AsyncGenerator<TransportMessage> {
        yield* q
        if (failure !== undefined) {
          throw failure
        }
      }
      return {
        [Symbol.asyncIterator]: iterate,
        unsubscribe: () => {
          sub.unsubscribe()
          q.end(true)
        },
        drain: () => sub.drain(),
      }
    },
    close() {
      closing ??= (async () => {
        large.close()
        if (opts.ownsConnection && !nc.isClosed()) {
          await nc.drain().catch(() => undefined)
        }
      })()
      return closing
    },
  }
}
