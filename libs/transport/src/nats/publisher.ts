import type { NatsConnection } from '@nats-io/nats-core'
import { headers } from '@nats-io/nats-core'
import { REPLY_KEY_HEADER } from '../reply-guard.ts'
import type { Transport } from '../types.ts'
import type { LargeMessages } from './large.ts'

/**
 * `publish` over `nc`: a message too large for one NATS message travels as a blob reference; a
 * `replyKey` rides in the {@link REPLY_KEY_HEADER} (protocol v2 packs, reply-guard.ts).
 */
export function createNatsPublisher(nc: NatsConnection, large: LargeMessages): Transport['publish'] {
  return (subject, data, po) => {
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
  }
}
