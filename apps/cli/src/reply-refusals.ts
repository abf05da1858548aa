import type { ReplyRefusal } from '@cohort/transport'

/**
 * The `onReplyRefused` of the CLI's NATS transports: one stderr line per refused message (a request
 * whose reply subject is not provably its sender's; docs/security.md#no-confused-deputy), at most
 * one line per `everyMs` (a requester controls the rate), each saying how many it stood for.
 */
export function logReplyRefusals(
  write: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
  o: { everyMs?: number; now?: () => number } = {},
): (r: ReplyRefusal) => void {
  const every = o.everyMs ?? 10_000
  const now = o.now ?? Date.now
  let last = -Infinity
  let skipped = 0
  return (r) => {
    const t = now()
    if (t - last < every) {
      skipped++
      return
    }
    const more = skipped > 0 ? `; ${skipped} more refused since the last line` : ''
    write(`cohort: left a message on ${r.subject} unanswered: ${r.reason} (reply subject ${JSON.stringify(r.reply.slice(0, 200))})${more}`)
    last = t
    skipped = 0
  }
}
