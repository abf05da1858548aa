import type { NatsConnection } from '@nats-io/nats-core'
import { createInbox } from '@nats-io/nats-core'
import { DEFAULT_INBOX_PREFIX, DEFAULT_SUBJECT_PREFIX, kvBuckets } from '@cohort/protocol'
import { InflightBudget, type InflightLimits } from './inflight.ts'
import { createKvConfigStore } from './nats/config-store.ts'
import { createKvDirectory } from './nats/directory.ts'
import { LargeMessages, type LargeMessageOptions } from './nats/large.ts'
import { createNatsPublisher } from './nats/publisher.ts'
import { ReconnectGuard } from './nats/reconnect-guard.ts'
import { createNatsRequester } from './nats/requester.ts'
import { createNatsSubscriber } from './nats/subscriber.ts'
import { ReplyGuard, type ReplyRefusal } from './reply-guard.ts'
import type { Transport } from './types.ts'

/** KV bucket where workers announce the models they serve (default prefix; see `kvBuckets`). */
export const MODELS_BUCKET = kvBuckets(DEFAULT_SUBJECT_PREFIX).models

/** KV bucket holding each model's runtime configuration (default prefix; see `kvBuckets`). */
export const CONFIG_BUCKET = kvBuckets(DEFAULT_SUBJECT_PREFIX).config

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
 *
 * A thin composition of the parts in `./nats/` (docs/architecture.md#the-nats-transport): the
 * requester, the publisher, the subscriber (reply guard, in-flight bound, pull), large messages,
 * the reconnect guard, the KV model directory and the config store.
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
  const { request, requestAll } = createNatsRequester(nc, large, guard)
  let closing: Promise<void> | undefined
  return {
    config: createKvConfigStore(nc, names.config, replicas),
    get maxMessageBytes() {
      return large.maxBytes
    },
    directory: createKvDirectory(nc, names.models, replicas),
    request,
    requestAll,
    onRepliesLost: (fn) => guard.onMoved(fn),
    // Under replyInboxPrefix: what the other side accepts as a reply subject.
    newInbox: () => createInbox(inbox),
    publish: createNatsPublisher(nc, large),
    subscribe: createNatsSubscriber(nc, { large, replies, budget }),
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
