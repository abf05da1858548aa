import type { NatsConnection } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'
import type { RequestOptions, Transport } from '../types.ts'
import type { LargeMessages } from './large.ts'
import type { ReconnectGuard } from './reconnect-guard.ts'
import { mapRequestError } from './request-errors.ts'

/** The requester's side of the NATS transport: `request` and `requestAll`. */
export type NatsRequester = Pick<Transport, 'request' | 'requestAll'>

/**
 * `request` (one reply, large messages both ways, abort, REPLY_LOST across a reconnect) and
 * `requestAll` (every reply within the wait) over `nc`.
 */
export function createNatsRequester(nc: NatsConnection, large: LargeMessages, guard: ReconnectGuard): NatsRequester {
  return {
    async request(subject, data, o: RequestOptions) {
      const max = large.maxBytes
      if (data.byteLength > max) {
        throw new CohortError(
          'PAYLOAD_TOO_LARGE',
          `encoded request of ${data.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${max} bytes`,
        )
      }
      if (o.signal?.aborted) {
        throw new CohortError('CANCELLED', 'request aborted')
      }
      const timeout = Math.max(1, o.timeoutMs)
      const started = Date.now()
      // Too large for one message: keep it here until the request settles; the receiver pulls it.
      const blob = large.isLarge(data) ? large.offer(data, timeout) : undefined
      const p = (async () => {
        const m = blob
          ? await nc.request(subject, new Uint8Array(0), { timeout, headers: blob.headers })
          : await nc.request(subject, data, { timeout })
        return large.isRef(m) ? large.body(m, Math.max(1, timeout - (Date.now() - started))) : m.data
      })()
      let onAbort: (() => void) | undefined
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(new CohortError('CANCELLED', 'request aborted'))
        o.signal?.addEventListener('abort', onAbort, { once: true })
      })
      const moved = guard.watch(subject)
      try {
        return await Promise.race(o.signal ? [p, aborted, moved.lost] : [p, moved.lost])
      } catch (e) {
        throw mapRequestError(e, subject, o.timeoutMs)
      } finally {
        moved.release()
        if (blob) {
          large.forget(blob.id)
        }
        p.catch(() => undefined)
        aborted.catch(() => undefined)
        if (onAbort) {
          o.signal?.removeEventListener('abort', onAbort)
        }
      }
    },
    async requestAll(subject, data, o) {
      const out: Uint8Array[] = []
      try {
        const it = await nc.requestMany(subject, data, { maxWait: o.timeoutMs })
        for await (const m of it) {
          const d = large.isRef(m) ? await large.body(m, o.timeoutMs).catch(() => undefined) : m.data
          if (d && d.byteLength > 0) {
            out.push(d)
          }
        }
      } catch {
        // No responders or timeout: whatever arrived is the answer.
      }
      return out
    },
  }
}
