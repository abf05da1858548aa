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
 * The in-flight admission of a message of `size` bytes on a bounded subscription: `undefined` when
 * `bound` took it (one request and `size` bytes, given back with its answer), else the refusal to
 * answer it with: PAYLOAD_TOO_LARGE (413, never servable here) or OVERLOADED (503, retry later).
 */
export function admitInflight(bound: InflightBudget, size: number): CohortError | undefined {
  if (size > bound.maxBytes) {
    // Never servable here: a 4xx naming the bound, not a retry.
    return new CohortError('PAYLOAD_TOO_LARGE', `message of ${size} bytes exceeds the worker's in-flight bytes bound (inflight.maxBytes) of ${bound.maxBytes} bytes`)
  }
  if (!bound.tryAdmit(size)) {
    return new CohortError('OVERLOADED', `the worker is at its in-flight bound: ${bound.describe()}; retry later`, { retryAfterS: 1 })
  }
  return undefined
}

/**
 * `m` with its body `data` as the subscriber hands it out. `held`: bytes counted against `bound`,
 * given back with the (first) answer.
 */
function toTransportMessage(m: Msg, data: Uint8Array, held: number | undefined, bound: InflightBudget | undefined, large: LargeMessages): TransportMessage {
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

/**
 * Step 2 of a message: the in-flight bound; the bytes held, `undefined` when unbounded (or nothing
 * to answer), or `false` (refused and answered).
 */
function admitMessage(m: Msg, bound: InflightBudget | undefined, large: LargeMessages): number | undefined | false {
  if (bound === undefined || !m.reply) {
    return undefined
  }
  const held = large.sizeOf(m)
  const refusal = admitInflight(bound, held)
  if (refusal) {
    LargeMessages.refuse(m, refusal)
    return false
  }
  return held
}

/**
 * `subscribe` over `nc`. Each message takes three steps: the reply guard (a reply subject not
 * provably the asker's: dropped unread), the in-flight bound (`bounded` subscriptions:
 * {@link admitInflight}), delivery (plain messages in order; a large one joins once pulled, without
 * holding up the rest; a failed pull is answered with the transfer error).
 */
export function createNatsSubscriber(nc: NatsConnection, deps: NatsSubscriberDeps): Transport['subscribe'] {
  const { large, replies, budget } = deps
  return (subject, so: SubscribeOptions = {}): TransportSubscription => {
    const sub = nc.subscribe(subject, so.queue ? { queue: so.queue } : {})
    const bound = so.bounded ? budget : undefined
    const cls = so.replies ?? 'inbox'
    const q = new AsyncQueue<TransportMessage>()
    let pulling = 0
    let ended = false
    let failure: Error | undefined
    const settle = (): void => {
      if (ended && pulling === 0) {
        q.end()
      }
    }
    /** Step 1: the reply guard (reply-guard.ts). */
    const guarded = (m: Msg): boolean => !m.reply || replies.allows(m.reply, cls, m.headers?.get(REPLY_KEY_HEADER) || undefined, m.subject)
    /** Step 3: hand it out, pulling a large one first. */
    const deliver = (m: Msg, held: number | undefined): void => {
      if (!large.isRef(m)) {
        q.push(toTransportMessage(m, m.data, held, bound, large))
        return
      }
      pulling++
      large
        .body(m)
        .then(
          (d) => q.push(toTransportMessage(m, d, held, bound, large)),
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
    void (async () => {
      try {
        for await (const m of sub) {
          if (!guarded(m)) {
            continue // Not provably the asker's: drop it unread and unanswered (reply-guard.ts).
          }
          const held = admitMessage(m, bound, large)
          if (held !== false) {
            deliver(m, held)
          }
        }
      } catch (e) {
        failure = e instanceof Error ? e : new Error(String(e))
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
