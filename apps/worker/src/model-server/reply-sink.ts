import { encodeNotice, msgpackSizeBound, type GatewayNotice, type InferReply } from '@cohort/protocol'
import type { Transport, TransportMessage } from '@cohort/transport'

/**
 * The replies of one pack's requests, sent together: one message per batch (protocol v2). Every
 * message but the last goes out as a publication on the pack's reply subject; the last one (every
 * request answered) as the message's answer, which gives back what the pack held of the worker's
 * in-flight bound (`bounded` subscriptions) only once the whole pack is answered.
 */
export class ReplySink {
  replies: InferReply[] = []
  #scheduled = false
  #left: number
  constructor(
    readonly msg: TransportMessage,
    readonly transport: Transport,
    /** Replies the pack will get in all. */
    total: number,
  ) {
    this.#left = total
  }

  /**
   * Publish on the pack's reply subject without answering the message (accept notices, early
   * replies, tokens). `watch`: this publication's own reply subject (a no-responders status comes
   * there when the gateway no longer subscribes).
   */
  publish(bytes: Uint8Array, watch?: string): void {
    if (this.msg.reply) {
      this.transport.publish(this.msg.reply, bytes, watch !== undefined ? { reply: watch } : undefined)
    }
  }

  /** Publish a notice (acceptance) on the pack's reply subject: as a value where the bus carries values. */
  notice(n: GatewayNotice): void {
    const reply = this.msg.reply
    if (reply !== undefined && this.msg.respondValue && this.transport.publishValue) {
      this.transport.publishValue(reply, { value: n, encode: () => encodeNotice(n) })
    } else {
      this.publish(encodeNotice(n))
    }
  }

  push(r: InferReply): void {
    this.replies.push(r)
    if (!this.#scheduled) {
      this.#scheduled = true
      // Every item of a batch completes in one synchronous loop: their replies leave together.
      queueMicrotask(() => this.flush())
    }
  }

  flush(): void {
    this.#scheduled = false
    const replies = this.replies.splice(0)
    if (replies.length === 0) {
      return
    }
    const max = this.transport.maxMessageBytes
    const n: GatewayNotice = { v: 2, t: 'replies', replies }
    const reply = this.msg.reply
    if (reply !== undefined && this.msg.respondValue && this.transport.publishValue && msgpackSizeBound(n) <= max) {
      // In-process and surely within the bus bound: the replies themselves, not encoded.
      this.#left -= replies.length
      const body = { value: n, encode: () => encodeNotice(n) }
      if (this.#left <= 0) {
        this.msg.respondValue(body)
      } else {
        this.transport.publishValue(reply, body)
      }
      return
    }
    const bytes = encodeNotice(n)
    const out: Uint8Array[] = []
    if (bytes.byteLength <= max) {
      out.push(bytes)
    } else {
      // Too big together: one message per reply, each within the bound or answered RESPONSE_TOO_LARGE.
      for (const r of replies) {
        const one = encodeNotice({ v: 2, t: 'replies', replies: [r] })
        out.push(one.byteLength <= max ? one : encodeNotice({ v: 2, t: 'replies', replies: [tooLarge(r, one.byteLength, max)] }))
      }
    }
    this.#left -= replies.length
    out.forEach((b, i) => {
      if (this.#left <= 0 && i === out.length - 1) {
        this.msg.respond(b)
      } else {
        this.publish(b)
      }
    })
  }
}

function tooLarge(r: InferReply, size: number, max: number): InferReply {
  return {
    v: 1,
    id: r.id,
    error: { code: 'RESPONSE_TOO_LARGE', message: `reply of ${size} bytes exceeds the bus limit of ${max} bytes; send fewer items per request` },
  }
}
