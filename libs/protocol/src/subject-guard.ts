/**
 * Which subjects a process may publish to on a requester's behalf (no confused deputy on the bus).
 *
 * A request names subjects the receiver then publishes to: its reply subject, its `ack` subject
 * (acceptance notice) and, for a message past `max_payload`, the subject its chunks are pulled from
 * (`Cohort-Blob` header). The receiver usually holds rights the requester lacks (a worker may write
 * the `cohort-models` KV bucket, a gateway may not), so it publishes only to subjects of the
 * namespace each field belongs to: replies under the inbox prefix, acceptance notices under
 * `<prefix>.accept.`, chunk requests under the blob subject prefix. Anything else is refused and
 * nothing is published there. Pure: no I/O.
 * @see docs/security.md#no-confused-deputy
 * @module
 */

/** Default prefix of reply subjects (NATS inboxes). */
export const DEFAULT_INBOX_PREFIX = '_INBOX'

/** One NATS token without wildcards or odd bytes. */
const TOKEN = '[A-Za-z0-9_-]+'
/** Longest subject a requester may name. */
const MAX_SUBJECT = 256

function under(prefix: string, subject: unknown, tokens: number | 'any'): boolean {
  if (typeof subject !== 'string' || subject.length > MAX_SUBJECT || !subject.startsWith(`${prefix}.`)) {
    return false
  }
  const rest = subject.slice(prefix.length + 1).split('.')
  if (tokens !== 'any' && rest.length !== tokens) {
    return false
  }
  const re = new RegExp(`^${TOKEN}$`)
  return rest.length > 0 && rest.every((t) => re.test(t))
}

/**
 * True when `subject` is an acceptance subject of the subject set whose `accept(id)` gives
 * `<prefix>.accept.<id>`: `<prefix>.accept.` followed by one or more plain tokens.
 */
export function isAcceptSubject(acceptBase: (id: string) => string, subject: unknown): boolean {
  const base = acceptBase('')
  return under(base.endsWith('.') ? base.slice(0, -1) : base, subject, 'any')
}

/** True when `subject` is a chunk subject `<blobPrefix>.<nuid>.<blob id>` (two plain tokens). */
export function isBlobSubject(blobPrefix: string, subject: unknown): boolean {
  return under(blobPrefix, subject, 2)
}

/** True when `subject` is a reply inbox: `<inboxPrefix>.` followed by plain tokens. */
export function isInboxSubject(subject: unknown, inboxPrefix: string = DEFAULT_INBOX_PREFIX): boolean {
  return under(inboxPrefix, subject, 'any')
}
