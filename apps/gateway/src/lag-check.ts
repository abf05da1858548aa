/**
 * The door's event-loop-lag check and the budgets it judges: a request's timeout (the server's,
 * shortened by the client), the check itself (`admitAtDoor`), and the deadline left after the
 * delay. (Not `deadlines.ts`: that is the packer's timer heap of many deadlines.)
 * @module
 */
import { answerError, CohortError } from '@cohort/protocol'

/**
 * The request's timeout in ms: the server limit, shortened by `parameters.timeout` (microseconds,
 * as Triton) or the `x-cohort-timeout-ms` header, never extended.
 */
export function effectiveTimeoutMs(serverMs: number, header: string | undefined, paramUs: unknown): number {
  let t = serverMs
  if (header !== undefined && header !== '') {
    const ms = Number(header)
    if (!Number.isFinite(ms) || ms <= 0) {
      throw new CohortError('BAD_REQUEST', `x-cohort-timeout-ms must be a positive number of milliseconds, got "${header}"`)
    }
    t = Math.min(t, ms)
  }
  if (paramUs !== undefined) {
    if (typeof paramUs !== 'number' || !Number.isFinite(paramUs) || paramUs < 0) {
      throw new CohortError('BAD_REQUEST', 'parameters.timeout must be a non-negative number of microseconds')
    }
    if (paramUs > 0) {
      t = Math.min(t, paramUs / 1000)
    }
  }
  return t
}

/**
 * How long (ms) this request plausibly waited before its handler ran, from the runtime adapter's
 * `queueDelayMs` (on Node: the event loop's current delay). When the gateway is so saturated that
 * this already exceeds the request's budget (server limit or `x-cohort-timeout-ms`), the request is
 * refused at once with 503 OVERLOADED, before its body is read: a refusal costs far less than a
 * request, so shedding this way lets a saturated gateway catch up instead of serving only late work.
 * Call it first in a handler; subtract the result from the deadline (see {@link deadlineAfter}).
 */
export function admitAtDoor(requestTimeoutMs: number, header: string | undefined, queueDelayMs: (() => number) | undefined): number {
  const lag = queueDelayMs?.() ?? 0
  if (!(lag > 0)) {
    return 0
  }
  const budget = effectiveTimeoutMs(requestTimeoutMs, header, undefined)
  if (lag >= budget) {
    throw answerError(
      'OVERLOADED',
      `the gateway is saturated: requests wait about ${Math.ceil(lag)} ms before they are read, not less than this request's ${Math.round(budget)} ms budget`,
      { retryAfterS: 1 },
    )
  }
  return lag
}

/**
 * The absolute deadline of a request that arrived about `lagMs` before now, with a budget of
 * `timeoutMs`. 503 OVERLOADED when nothing is left of it.
 */
export function deadlineAfter(timeoutMs: number, lagMs: number): number {
  if (lagMs >= timeoutMs) {
    throw answerError('OVERLOADED', `the request waited about ${Math.ceil(lagMs)} ms before it was read: its ${Math.round(timeoutMs)} ms budget is spent`, {
      retryAfterS: 1,
    })
  }
  return Date.now() - lagMs + timeoutMs
}
