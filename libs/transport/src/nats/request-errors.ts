import { NoRespondersError, RequestError, TimeoutError } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'

/**
 * The CohortError a failed NATS request stands for: no responders is NO_WORKER (503), a timeout
 * DEADLINE_EXCEEDED (504), a `max_payload` refusal PAYLOAD_TOO_LARGE (413), anything else NO_WORKER.
 * A CohortError (REPLY_LOST, CANCELLED, a chunk transfer's) passes as it is.
 */
export function mapRequestError(e: unknown, subject: string, timeoutMs: number): CohortError {
  if (e instanceof CohortError) {
    return e
  }
  const cause = e instanceof Error ? e.cause : undefined
  if (e instanceof NoRespondersError || cause instanceof NoRespondersError || (e instanceof RequestError && e.isNoResponders())) {
    return new CohortError('NO_WORKER', `no responders on ${subject}`, { cause: e })
  }
  if (e instanceof TimeoutError || cause instanceof TimeoutError) {
    return new CohortError('DEADLINE_EXCEEDED', `no reply on ${subject} within ${Math.round(timeoutMs)} ms`, { cause: e })
  }
  const msg = e instanceof Error ? e.message : String(e)
  if (/max_payload/i.test(msg)) {
    return new CohortError('PAYLOAD_TOO_LARGE', msg, { cause: e })
  }
  return new CohortError('NO_WORKER', `NATS request failed: ${msg}`, { cause: e })
}
