import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'
import { AsyncQueue } from '../async-queue.ts'
import type { InflightBudget } from '../inflight.ts'
import { REPLY_KEY_HEADER, type ReplyGuard } from '../reply-guard.ts'
import type { SubscribeOptions, Transport, TransportMessage, TransportSubscription } from '../types.ts'
import { LargeMessages } from './large.ts'

/** What the subscriber checks each message against. */
export interface NatsSubscriberDeps {
  /** Large messages: pulled before delivery, and replies too large for one message. */
  large: LargeMessages
  /** The reply-subject check (reply-guard.ts): a message failing it is dropped unread. */
  replies: ReplyGuard
  /** The in-flight bound of `bounded` subscriptions; none: no bound. */
  budget: InflightBudget | undefined
}

/**
 * `subscribe` over `nc`: each message passes the reply guard, then (on `bounded` subscriptions) the
 * in-flight bound, then a large one is pulled; plain messages pass in order.
 */
export function createNatsSubscriber(nc: NatsConnection, deps: NatsSubscriberDeps): Transport['subscribe'] {
  const { large, replies, budget } = deps
  return (subject, so: SubscribeOptions = {}): TransportSubscription => {
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
  }
}
