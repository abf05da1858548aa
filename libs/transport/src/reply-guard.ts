/**
 * Where a responder on the bus may answer (docs/security.md#no-confused-deputy). With
 * `allow_responses`, NATS lets a process publish to the reply subject of any message it received,
 * whatever that subject is, so a requester could make a responder write where only the responder
 * may (`$KV.cohort-models.*`, `$JS.API.*`, `$JS.ACK.*`, another gateway's inbox). Every responder
 * answers only to a reply subject it can prove belongs to the asker:
 *
 * - class `inbox` (every responder): an inbox of the form a NATS client makes for its requests,
 *   `<inboxPrefix>.<nuid>` or `<inboxPrefix>.<nuid>.<token>` (nuid: 16 to 64 letters and digits).
 * - class `pack` (the worker's model subjects): also a protocol-v2 gateway inbox
 *   `<prefix>.gw.<gateway>.<key id>.<seq>`, when the message carries the reply key whose SHA-256
 *   gives `<key id>` ({@link REPLY_KEY_HEADER}). Each gateway makes its key at start and sends it
 *   only to workers (on the model subjects, which no gateway may subscribe to), so another gateway
 *   cannot name this one's inbox: it knows the id, never the key.
 *
 * Anything else (`$`-subjects, other deployments' prefixes, odd forms) is refused: the message is
 * dropped unanswered. Pure: no I/O.
 * @module
 */
import { sha256 } from './sha256.ts'

/** Header of a pack (protocol v2) that carries its gateway's reply key. */
export const REPLY_KEY_HEADER = 'Cohort-Reply-Key'

/** Which reply subjects a subscription's messages may name (see the module). */
export type ReplyClass = 'inbox' | 'pack'

/** Options of {@link ReplyGuard}. */
export interface ReplyGuardOptions {
  /** Prefix of the requesters' inboxes (nats.js `inboxPrefix`). @default '_INBOX' */
  inboxPrefix?: string
  /** The deployment's subject prefix: gateway inboxes are `<prefix>.gw.…`. @default 'cohort' */
  subjectPrefix?: string
  /** Told of each refused message (to log it; throttle there: a requester controls the rate). @default none */
  onRefused?: (refusal: ReplyRefusal) => void
}

/** A message a responder did not answer, and why. */
export interface ReplyRefusal {
  /** The subject it came on. */
  subject: string
  /** The reply subject it named. */
  reply: string
  reason: string
}

const MAX_SUBJECT = 256
const NUID = /^[A-Za-z0-9]{16,64}$/
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/
/** A reply key: 32 random bytes in base64url (43 characters). */
const KEY = /^[A-Za-z0-9_-]{43}$/
/** Verified keys kept per guard (a worker sees one per gateway process). */
const MAX_VERIFIED = 1024

const b64url = (b: Uint8Array): string => {
  let s = ''
  for (const x of b) s += String.fromCharCode(x)
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** The id a reply key stands for in a gateway inbox: base64url of its SHA-256, 22 characters (132 bits). */
export function replyKeyId(key: string): string {
  return b64url(sha256(new TextEncoder().encode(key))).slice(0, 22)
}

/** A fresh reply key (32 random bytes, `crypto.getRandomValues`) and its id. */
export function newReplyKey(): { key: string; id: string } {
  const key = b64url(crypto.getRandomValues(new Uint8Array(32)))
  return { key, id: replyKeyId(key) }
}

/**
 * True when `reply` is the ack subject of a delivery from `consumer` of `stream`
 * (`$JS.ACK.<stream>.<consumer>.…`, or the domain form `$JS.ACK.<domain>.<hash>.<stream>.<consumer>.…`):
 * only then may a job delivery be acked, nak'ed or extended.
 */
export function isAckOf(reply: string | undefined, stream: string, consumer: string): boolean {
  if (typeof reply !== 'string' || reply.length > MAX_SUBJECT || !reply.startsWith('$JS.ACK.')) {
    return false
  }
  const t = reply.split('.')
  return (t.length === 9 && t[2] === stream && t[3] === consumer) || (t.length >= 12 && t[4] === stream && t[5] === consumer)
}

/** The one check every responder makes before it answers (see the module). */
export class ReplyGuard {
  readonly #inbox: string
  readonly #gw: string
  readonly #verified = new Map<string, string>()
  readonly #onRefused: ((r: ReplyRefusal) => void) | undefined
  /** Messages refused so far (their reply subject failed the check). */
  refused = 0

  constructor(o: ReplyGuardOptions = {}) {
    this.#inbox = `${o.inboxPrefix ?? '_INBOX'}.`
    this.#gw = `${o.subjectPrefix ?? 'cohort'}.gw.`
    this.#onRefused = o.onRefused
  }

  /**
   * True when a message of class `cls` (on `subject`) may be answered on `reply` (no reply: nothing
   * to answer, true). A refusal is counted and reported to `onRefused`.
   */
  allows(reply: string | undefined, cls: ReplyClass = 'inbox', key?: string, subject = ''): boolean {
    if (reply === undefined) {
      return true
    }
    const why = this.refusal(reply, cls, key)
    if (why !== undefined) {
      this.refused++
      try {
        this.#onRefused?.({ subject, reply, reason: why })
      } catch {
        // A failing logger must not stop the responder.
      }
    }
    return why === undefined
  }

  /** Why `reply` may not be answered, or undefined when it may. */
  refusal(reply: string | undefined, cls: ReplyClass = 'inbox', key?: string): string | undefined {
    if (reply === undefined) {
      return undefined
    }
    if (reply.length > MAX_SUBJECT) {
      return `reply subject longer than ${MAX_SUBJECT} characters`
    }
    if (reply.startsWith(this.#inbox)) {
      const t = reply.slice(this.#inbox.length).split('.')
      const [nuid, token] = t
      if (t.length <= 2 && nuid !== undefined && NUID.test(nuid) && (token === undefined || TOKEN.test(token))) {
        return undefined
      }
      return `reply subject is not an inbox of the form ${this.#inbox}<nuid>[.<token>]`
    }
    if (reply.startsWith(this.#gw)) {
      if (cls !== 'pack') {
        return 'a gateway inbox answers packs only'
      }
      const t = reply.slice(this.#gw.length).split('.')
      if (t.length !== 3 || !t.every((x) => TOKEN.test(x))) {
        return `reply subject is not a gateway inbox ${this.#gw}<gateway>.<key id>.<seq>`
      }
      if (key === undefined || !KEY.test(key) || this.#idOf(key) !== t[1]) {
        return `the pack does not carry the reply key of ${this.#gw}${t[0]}.${t[1]} (${REPLY_KEY_HEADER})`
      }
      return undefined
    }
    return reply.startsWith('$')
      ? "reply subject is a system subject ($KV, $JS, $SYS, $SRV...), never an asker's inbox"
      : `reply subject is neither under ${this.#inbox} nor a gateway inbox under ${this.#gw}`
  }

  #idOf(key: string): string {
    let id = this.#verified.get(key)
    if (id === undefined) {
      id = replyKeyId(key)
      const oldest = this.#verified.keys().next()
      if (this.#verified.size >= MAX_VERIFIED && oldest.done !== true) {
        this.#verified.delete(oldest.value)
      }
      this.#verified.set(key, id)
    }
    return id
  }
}
