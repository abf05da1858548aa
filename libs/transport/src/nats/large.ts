import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/nats-core'
import { headers, nuid } from '@nats-io/nats-core'
import { CohortError, isBlobSubject } from '@cohort/protocol'
import { BLOB_ERROR_HEADER, BLOB_HEADER, BlobStore, fetchBlob, formatBlobError, formatBlobRef, parseBlobError, parseBlobRef } from '../blob.ts'
import { ReplyGuard } from '../reply-guard.ts'

/** Default NATS max_payload when the server did not say (1 MiB). */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024
/** Default upper bound of one message, chunked or not (64 MiB). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
/** Default time a sender keeps a reply or published blob for its reader (30 s). */
export const DEFAULT_BLOB_TTL_MS = 30_000
/** Default subject prefix of chunk requests: `cohort.blob.<nuid>.<blob id>`. */
export const DEFAULT_BLOB_SUBJECT_PREFIX = 'cohort.blob'
/** Bytes of `max_payload` left for headers and protocol overhead in each chunk. */
const HEADROOM_BYTES = 4096

const EMPTY = new Uint8Array(0)
/** Body of the message a reader publishes on a blob's subject once it has every chunk. */
const DONE = 'done'
const enc = new TextEncoder()
const dec = new TextDecoder()

/** Options of the NATS transport's large-message support. */
export interface LargeMessageOptions {
  /**
   * Largest message the transport carries, in bytes. Messages above the server's `max_payload`
   * travel as a reference and are pulled in chunks; a value at or below `max_payload` turns that off.
   * @default 67108864 (64 MiB)
   */
  maxMessageBytes?: number
  /** How long a reply or a published message larger than `max_payload` is kept for its reader, in ms. @default 30000 */
  blobTtlMs?: number
  /**
   * Subjects a sender answers chunk requests on: `<prefix>.<nuid>.<blob id>`. Users of a NATS
   * account with permissions need publish and subscribe rights on `<prefix>.>` (and to answer
   * requests: `allow_responses`). @default 'cohort.blob'
   */
  blobSubjectPrefix?: string
}

/** A message body handed out by the sender in chunks, over request-reply on a subject of its own. */
export class LargeMessages {
  readonly #nc: NatsConnection
  readonly #store = new BlobStore()
  readonly #maxBytes: number
  readonly #ttlMs: number
  readonly #subjectPrefix: string
  readonly #guard: ReplyGuard
  #prefix: string | undefined
  #sub: { unsubscribe(): void } | undefined
  #closed = false

  /** `guard`: the reply-subject check of the transport (chunk requests answer inboxes only). */
  constructor(nc: NatsConnection, o: LargeMessageOptions = {}, guard = new ReplyGuard()) {
    this.#nc = nc
    this.#guard = guard
    this.#maxBytes = o.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
    this.#ttlMs = o.blobTtlMs ?? DEFAULT_BLOB_TTL_MS
    this.#subjectPrefix = o.blobSubjectPrefix ?? DEFAULT_BLOB_SUBJECT_PREFIX
    if (!(this.#maxBytes > 0) || !(this.#ttlMs > 0)) {
      throw new RangeError('maxMessageBytes and blobTtlMs must be > 0')
    }
  }

  /** The server's `max_payload`. */
  get serverMax(): number {
    return this.#nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD
  }

  /** Largest message this transport carries (the bound, or `max_payload` when chunking is off). */
  get maxBytes(): number {
    return Math.max(this.#maxBytes, this.serverMax)
  }

  /** True when `data` must travel as a blob. */
  isLarge(data: Uint8Array): boolean {
    return this.#maxBytes > this.serverMax && data.byteLength > this.serverMax - HEADROOM_BYTES
  }

  /**
   * Keep `data` and return the headers of the small message that stands for it, and the blob id.
   * `once`: forget it when its reader says it has every chunk, or at `ttlMs` (replies).
   */
  offer(data: Uint8Array, ttlMs = this.#ttlMs, once = false): { headers: MsgHdrs; id: string } {
    const prefix = this.#serve()
    const chunkSize = Math.max(1024, this.serverMax - HEADROOM_BYTES)
    const id = this.#store.put(data, chunkSize, ttlMs, once)
    const h = headers()
    h.set(BLOB_HEADER, formatBlobRef({ subject: `${prefix}.${id}`, size: data.byteLength, chunkSize, ttlMs }))
    return { headers: h, id }
  }

  /** Forget a blob that is no longer needed (its request settled). */
  forget(id: string): void {
    this.#store.delete(id)
  }

  /** Blobs held for their readers (replies, requests and publications not yet forgotten). */
  get held(): number {
    return this.#store.size
  }

  /** The size of what `m` carries: a reference's declared size (0 when malformed), else its data's. */
  sizeOf(m: Msg): number {
    const ref = m.headers?.get(BLOB_HEADER)
    if (!ref) {
      return m.data.byteLength
    }
    try {
      return parseBlobRef(ref).size
    } catch {
      return 0
    }
  }

  /** True when `m` stands for a blob or reports a failed transfer. */
  isRef(m: Msg): boolean {
    return m.headers?.has(BLOB_HEADER) === true || m.headers?.has(BLOB_ERROR_HEADER) === true
  }

  /**
   * The body of `m`: its data, or the blob it refers to, pulled from the sender within `timeoutMs`.
   * Throws the CohortError a {@link BLOB_ERROR_HEADER} reports, or BLOB_UNAVAILABLE / PAYLOAD_TOO_LARGE.
   */
  async body(m: Msg, timeoutMs?: number): Promise<Uint8Array> {
    const err = m.headers?.get(BLOB_ERROR_HEADER)
    if (err) {
      throw parseBlobError(err)
    }
    const ref = m.headers?.get(BLOB_HEADER)
    if (!ref) {
      return m.data
    }
    const r = parseBlobRef(ref)
    // The sender names the subject; request chunks only under the blob prefix (no confused deputy:
    // docs/security.md#no-confused-deputy), so a reference can never make this process publish elsewhere.
    if (!isBlobSubject(this.#subjectPrefix, r.subject)) {
      throw new CohortError(
        'BAD_REQUEST',
        `${BLOB_HEADER} subject ${JSON.stringify(r.subject.slice(0, 200))} is not a chunk subject under ${this.#subjectPrefix}.<id>.<blob>; nothing was requested from it`,
      )
    }
    const data = await fetchBlob(
      r,
      async (i, t) => {
        const reply = await this.#nc.request(r.subject, enc.encode(String(i)), { timeout: Math.max(1, t) })
        const e = reply.headers?.get(BLOB_ERROR_HEADER)
        if (e) {
          throw parseBlobError(e)
        }
        return reply.data
      },
      { maxBytes: this.maxBytes, ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
    )
    // Every chunk is here: the sender may forget a reply now (else it keeps it for a retry until its TTL).
    try {
      this.#nc.publish(r.subject, enc.encode(DONE))
    } catch {
      // Closing: the sender's TTL forgets it.
    }
    return data
  }

  /** Answer `m` with a transfer failure (the receiver could not pull what `m` referred to). */
  static refuse(m: Msg, e: unknown): void {
    const h = headers()
    h.set(BLOB_ERROR_HEADER, formatBlobError(e))
    try {
      m.respond(EMPTY, { headers: h })
    } catch {
      // The connection is closing: nobody to tell.
    }
  }

  /** Respond to `m` with `data`, as a blob when it is too large for one message. */
  respond(m: Msg, data: Uint8Array): boolean {
    if (!this.isLarge(data) || data.byteLength > this.#maxBytes || !m.reply) {
      return m.respond(data)
    }
    const { headers: h } = this.offer(data, this.#ttlMs, true)
    return m.respond(EMPTY, { headers: h })
  }

  /** Drop every blob and stop answering chunk requests (the connection stays open). Idempotent. */
  close(): void {
    this.#closed = true
    this.#store.close()
    this.#sub?.unsubscribe()
    this.#sub = undefined
  }

  /** Start answering chunk requests (once) and return the subject prefix they use. */
  #serve(): string {
    if (this.#prefix) {
      return this.#prefix
    }
    const prefix = `${this.#subjectPrefix}.${nuid.next()}`
    if (this.#closed) {
      throw new CohortError('SHUTTING_DOWN', 'the transport is closed')
    }
    const sub = this.#nc.subscribe(`${prefix}.*`)
    this.#prefix = prefix
    this.#sub = sub
    void (async () => {
      for await (const m of sub) {
        const id = m.subject.slice(prefix.length + 1)
        const body = dec.decode(m.data)
        if (body === DONE) {
          this.#store.finish(id)
          continue
        }
        if (!m.reply || !this.#guard.allows(m.reply, 'inbox', undefined, m.subject)) {
          continue // Answer only an asker's inbox (reply-guard.ts): never $KV, $JS, another gateway.
        }
        const chunk = this.#store.chunk(id, Number(body))
        if (chunk) {
          m.respond(chunk)
        } else {
          LargeMessages.refuse(m, new CohortError('BLOB_UNAVAILABLE', `large message ${id} expired or was never offered here`))
        }
      }
    })().catch(() => undefined)
    return prefix
  }
}
