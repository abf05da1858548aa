/**
 * The transport port: what the gateway and the worker need from a message bus.
 * Two implementations: NATS (`createNatsTransport`) and in-process (`InProcessTransport`),
 * so the embedded mode runs the very same gateway and worker code without a NATS server.
 * @module
 */

/** A message received on a subscription. */
export interface TransportMessage {
  readonly subject: string
  readonly data: Uint8Array
  /**
   * Reply to the sender of a request (or of a publication with a reply subject, any number of
   * times); false when there is no one to reply to.
   */
  respond(data: Uint8Array): boolean
  /** The reply subject the sender named, if any (publications with `reply`, requests over NATS). */
  readonly reply?: string
  /**
   * Set on the message the bus sends to a publication's reply subject when nobody subscribed to
   * the publication's subject (NATS no-responders status 503); `data` is then empty.
   */
  readonly noResponders?: boolean
  /**
   * The value itself, when the sender carried one ({@link Transport.publishValue}, in-process
   * only): receivers that understand it read this and skip decoding `data` (which is then encoded
   * from it on first read, for any other receiver). The sender's object, not a copy: neither side
   * may change it after sending.
   */
  readonly value?: unknown
  /** {@link respond} with a value (present where the bus carries values, as `value` is). */
  respondValue?(body: CarriedValue): boolean
}

/** A message body handed over as a value (see {@link Transport.publishValue}). */
export interface CarriedValue {
  /** Handed to receivers as {@link TransportMessage.value}, never copied. */
  readonly value: unknown
  /** Its encoding, for a receiver that reads `data` instead (called at most once, on first read). */
  encode(): Uint8Array
}

/** Options of {@link Transport.publish}. */
export interface PublishOptions {
  /**
   * Reply subject: receivers' `respond()` publishes there. When nobody subscribes to the subject,
   * a message with `noResponders: true` arrives there instead.
   */
  reply?: string
  /**
   * The publisher's reply key (protocol v2 packs): proves that `reply`, a gateway inbox
   * `<prefix>.gw.<gateway>.<key id>.<seq>`, is the publisher's own (reply-guard.ts). Over NATS it
   * travels as the `Cohort-Reply-Key` header; subscribers see it, checked, never as data.
   */
  replyKey?: string
}

/** A subscription, consumed with `for await`. */
export interface TransportSubscription extends AsyncIterable<TransportMessage> {
  /** Stop receiving now; messages not yet consumed are dropped. Idempotent. */
  unsubscribe(): void
  /** Stop receiving new messages; the iterator ends once the delivered ones are consumed. */
  drain(): Promise<void>
  /**
   * Instead of iterating: `fn` gets each message, in order, without a promise per message; resolves
   * when the subscription ends. Present on buses that can (in-process); {@link consume} uses it.
   */
  listen?(fn: (m: TransportMessage) => void): Promise<void>
}

/** Options of {@link Transport.request}. */
export interface RequestOptions {
  /** Give up after this many ms (DEADLINE_EXCEEDED). */
  timeoutMs: number
  /** Abort the wait (CANCELLED). An AbortSignal, or anything shaped like one. */
  signal?: AbortSignalLike
}

/** The part of AbortSignal the transports use (so adapters can pass cheaper objects). */
export interface AbortSignalLike {
  readonly aborted: boolean
  addEventListener(type: 'abort', fn: () => void, opts?: { once?: boolean }): void
  removeEventListener(type: 'abort', fn: () => void): void
}

/** Options of {@link Transport.subscribe}. */
export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group. */
  queue?: string
  /**
   * Count this subscription's requests (messages with a reply subject) against the transport's
   * in-flight bound (`NatsTransportOptions.inflight`) from arrival until answered: past it a request
   * is refused at once with 503 OVERLOADED, and a large one before any chunk is pulled. @default false
   */
  bounded?: boolean
  /**
   * Which reply subjects its messages may name (reply-guard.ts): `inbox`, a requester's inbox only;
   * `pack`, also a gateway inbox proven by the pack's reply key (the worker's model subjects).
   * A message naming anything else is dropped unanswered. @default 'inbox'
   */
  replies?: 'inbox' | 'pack'
}

/** The bus. Requests fail with CohortError: NO_WORKER, DEADLINE_EXCEEDED, CANCELLED, PAYLOAD_TOO_LARGE. */
export interface Transport {
  /**
   * Largest message the bus takes, in bytes. Over NATS this is `maxMessageBytes` (64 MiB by default):
   * messages past the server's `max_payload` travel in chunks (docs/protocol.md#large-messages).
   */
  readonly maxMessageBytes: number
  /** Request-reply. Rejects with NO_WORKER at once when nobody subscribes to `subject`. */
  request(subject: string, data: Uint8Array, opts: RequestOptions): Promise<Uint8Array>
  /** Gather every reply that arrives within `timeoutMs` (discovery). */
  requestAll(subject: string, data: Uint8Array, opts: { timeoutMs: number }): Promise<Uint8Array[]>
  /**
   * Fire and forget (with `reply`, receivers answer on that subject, and when nobody subscribes to
   * `subject` a {@link TransportMessage.noResponders} message arrives there: a sender that
   * subscribes to `reply` learns that its receiver went away, at no cost while it is there).
   */
  publish(subject: string, data: Uint8Array, opts?: PublishOptions): void
  /**
   * {@link publish} of a value without encoding it, on buses inside one process (absent over
   * NATS): receivers get `body.value` as {@link TransportMessage.value}. The sender checks the bus
   * bound itself (an upper bound of the size, e.g. `msgpackSizeBound`) before choosing it.
   */
  publishValue?(subject: string, body: CarriedValue, opts?: PublishOptions): void
  /**
   * A fresh subject, used by nobody else, under the deployment's inbox prefix (over NATS
   * `replyInboxPrefix`, `_INBOX` by default: what every transport accepts as a reply subject, and
   * what the least-privilege users may subscribe to).
   * Subscribe to `<inbox>.>` and publish with `reply: <inbox>.<key>` to be told, per key, that a
   * publication found no subscriber.
   */
  newInbox(): string
  subscribe(subject: string, opts?: SubscribeOptions): TransportSubscription
  /** Directory of models that were ever announced (to tell 404 from 503). */
  readonly directory: ModelDirectory
  /** Per-model runtime configuration that every worker follows (NATS KV `cohort-config`). */
  readonly config: ConfigStore
  /**
   * Register `fn` to be told that replies in flight may have been lost: over NATS, after the
   * connection moved to another server and the reconnect grace passed (`reconnectReplyGraceMs`);
   * `movedAt` (epoch ms) is when it moved: replies to what was sent before then are lost if not come.
   * Returns a function that unregisters it. Absent on buses that never move (in-process).
   */
  onRepliesLost?(fn: (movedAt: number) => void): () => void
  /** Flush and close. Idempotent. */
  close(): Promise<void>
}

/** Remembers which model names exist, beyond the life of any one worker. */
export interface ModelDirectory {
  announce(model: string, info: Uint8Array): Promise<void>
  /** true/false when known; undefined when the directory cannot tell (no JetStream). */
  known(model: string): Promise<boolean | undefined>
}

/** A model's stored runtime configuration (batching settings), as plain JSON. */
export type ModelConfig = Record<string, unknown>

/** Stored per-model configuration with change notification. */
export interface ConfigStore {
  get(model: string): Promise<ModelConfig | undefined>
  /** Store a model's configuration. Throws CohortError NOT_READY when there is no store (no JetStream). */
  put(model: string, value: ModelConfig): Promise<void>
  /**
   * Remove a model's stored configuration: watchers get `{}` (every field back to the lower
   * layers). Throws CohortError NOT_READY when there is no store (no JetStream).
   */
  delete(model: string): Promise<void>
  /** Call `onChange` with the current value (if any) and every later one (`{}` after a delete); stop() ends it. */
  watch(model: string, onChange: (value: ModelConfig) => void): { stop(): void }
}
