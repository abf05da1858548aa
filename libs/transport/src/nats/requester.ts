import type { MsgHdrs, NatsConnection } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'
import type { AbortSignalLike, RequestOptions, Transport } from '../types.ts'
import type { LargeMessages } from './large.ts'
import type { ReconnectGuard } from './reconnect-guard.ts'
import { mapRequestError } from './request-errors.ts'

/** The requester's side of the NATS transport: `request` and `requestAll`. */
export type NatsRequester = Pick<Transport, 'request' | 'requestAll'>

/**
 * `request` (one reply, large messages both ways, abort, REPLY_LOST across a reconnect) and
 * `requestAll` (every reply within the wait) over `nc`. A request takes named steps:
 * {@link checkRequest}, {@link exchange} raced against {@link rejectOnAbort} and the reconnect
 * guard's `lost`, then {@link mapRequestError} on failure.
 */
export function createNatsRequester(nc: NatsConnection, large: LargeMessages, guard: ReconnectGuard): NatsRequester {
  return {
    async request(subject, data, o: RequestOptions) {
      checkRequest(data, large.maxBytes, o.signal)
      const timeout = Math.max(1, o.timeoutMs)
      const started = Date.now()
      // Too large for one message: keep it here until the request settles; the receiver pulls it.
      const blob = large.isLarge(data) ? large.offer(data, timeout) : undefined
      const p = exchange(nc, large, subject, data, blob, timeout, started)
      const abort = rejectOnAbort(o.signal)
      const moved = guard.watch(subject)
      try {
        return await Promise.race(o.signal ? [p, abort.aborted, moved.lost] : [p, moved.lost])
      } catch (e) {
        throw mapRequestError(e, subject, o.timeoutMs)
      } finally {
        moved.release()
        if (blob) {
          large.forget(blob.id)
        }
        p.catch(() => undefined)
        abort.dispose()
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

/** Step 1 of a request: refuse at once what is over the bus limit (413) or already aborted (499). */
function checkRequest(data: Uint8Array, max: number, signal: AbortSignalLike | undefined): void {
  if (data.byteLength > max) {
    throw new CohortError('PAYLOAD_TOO_LARGE', `encoded request of ${data.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${max} bytes`)
  }
  if (signal?.aborted) {
    throw new CohortError('CANCELLED', 'request aborted')
  }
}

/**
 * Step 2: send the request (the data, or the reference to `blob`) and take its reply, pulling a
 * large reply within what is left of `timeout` since `started`.
 */
async function exchange(
  nc: NatsConnection,
  large: LargeMessages,
  subject: string,
  data: Uint8Array,
  blob: { headers: MsgHdrs } | undefined,
  timeout: number,
  started: number,
): Promise<Uint8Array> {
  const m = blob ? await nc.request(subject, new Uint8Array(0), { timeout, headers: blob.headers }) : await nc.request(subject, data, { timeout })
  return large.isRef(m) ? large.body(m, Math.max(1, timeout - (Date.now() - started))) : m.data
}

/** Step 3: a promise that rejects with CANCELLED when `signal` aborts; `dispose` stops listening. */
function rejectOnAbort(signal: AbortSignalLike | undefined): { aborted: Promise<never>; dispose(): void } {
  let onAbort: (() => void) | undefined
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new CohortError('CANCELLED', 'request aborted'))
    signal?.addEventListener('abort', onAbort, { once: true })
  })
  return {
    aborted,
    dispose: () => {
      aborted.catch(() => undefined)
      if (onAbort) {
        signal?.removeEventListener('abort', onAbort)
      }
    },
  }
}
