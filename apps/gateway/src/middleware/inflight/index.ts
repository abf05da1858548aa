import type { MiddlewareHandler } from 'hono'
import type { CohortError } from '@cohort/protocol'
import type { InflightBudget } from '@cohort/transport'
import { declaredLength, setBodyTicket } from '../../body.ts'
import { DRAIN_REFUSED_BYTES } from '../../refusal.ts'
import { errorResponse } from '../../errors.ts'
import { inflightOverloaded, inflightTooLarge } from '../../admission.ts'
import { headerOf } from '../../request-header.ts'

/**
 * How many bytes of the bound one byte of a body that is not binary (JSON) counts for: parsing JSON
 * holds the bytes, the text, its array of numbers (grown by doubling) and the typed arrays and
 * binary envelope built from it: the gateway's RSS grew 1.8 to 5.75 times the JSON bytes in flight
 * (`scripts/json-weight.mjs`, docs/bench/json-weight-2026-12-02.md; larger bodies cost more per byte); a
 * binary body (`application/octet-stream`, or with `Inference-Header-Content-Length`) is held about
 * twice, which the bound's documented headroom covers (docs/reliability.md#bounds).
 */
export const JSON_BODY_WEIGHT = 6

export { DRAIN_REFUSED_BYTES } from '../../refusal.ts'

/** What a refusal of a JSON body says about its weight (made once, not per request). */
const JSON_AS = ` (a JSON body counts ${JSON_BODY_WEIGHT} times its length: parsing holds that much)`

/** True for a body that is held as bytes (binary), false for one that is parsed as JSON. */
function isBinary(contentType: string | undefined, inferenceHeader: string | undefined): boolean {
  return inferenceHeader !== undefined || (contentType ?? '').toLowerCase().startsWith('application/octet-stream')
}

/**
 * Bound the requests with bodies (POST, PUT) and their bytes held at once (`inflight`): a request
 * past either bound is refused 503 `OVERLOADED` with `Retry-After` before its body is read; a body
 * without Content-Length is counted while it is read and refused the same way once past the bound.
 * A body larger than the whole bytes bound can never be served: 413 naming the bound (a declared
 * one before it is read, an undeclared one once it passes the bound).
 * Everything is given back when the handler returns. The budget is the door's
 * ({@link InferenceDoor.inflight}), shared with gRPC; none (`inflight: false`): no middleware.
 */
export function inflightMiddleware(budget: InflightBudget | undefined): MiddlewareHandler | undefined {
  if (budget === undefined) {
    return undefined
  }
  return async (c, next) => {
    if (c.req.method !== 'POST' && c.req.method !== 'PUT') {
      return next()
    }
    const len = declaredLength(headerOf(c, 'content-length'))
    const weight = isBinary(headerOf(c, 'content-type'), headerOf(c, 'inference-header-content-length')) ? 1 : JSON_BODY_WEIGHT
    const counted = len === undefined ? undefined : len * weight
    const as = weight === 1 ? '' : JSON_AS
    // Refused before the body is read. A small body is read and discarded by the server, so the
    // connection stays usable; a large one closes the connection (the client may resend).
    const refuse = (e: CohortError) => {
      if (len === undefined || len > DRAIN_REFUSED_BYTES) {
        c.header('connection', 'close')
      }
      return errorResponse(c, e)
    }
    if (counted !== undefined && counted > budget.maxBytes) {
      return refuse(inflightTooLarge(budget, len, as))
    }
    if (!budget.tryAdmit(counted ?? 0)) {
      return refuse(inflightOverloaded(budget))
    }
    let held = counted ?? 0
    setBodyTicket(c, {
      declared: len !== undefined,
      take(raw) {
        const n = raw * weight
        if (held + n > budget.maxBytes) {
          // This body alone passes the whole bound: it can never be served (not a 503).
          throw inflightTooLarge(budget, undefined, as, Math.floor(budget.maxBytes / weight))
        }
        if (!budget.tryTakeBytes(n)) {
          throw inflightOverloaded(budget)
        }
        held += n
      },
    })
    try {
      await next()
    } finally {
      budget.release(held)
    }
  }
}
