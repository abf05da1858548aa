import type { MiddlewareHandler } from 'hono'
import type { CohortError } from '@cohort/protocol'
import type { InflightBudget } from '@cohort/transport'
import { declaredLength, setBodyTicket } from '../../body.ts'
import { errorResponse } from '../../errors.ts'
import { inflightOverloaded, inflightTooLarge } from '../../admission.ts'
import type { InferenceDoor } from '../../door.ts'


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
    const len = declaredLength(c.req.header('content-length'))
    // Refused before the body is read: close the connection too, so the body is never read (a
    // kept-alive connection would have to read and discard it, and the client may resend).
    const refuse = (e: CohortError) => {
      c.header('connection', 'close')
      return errorResponse(c, e)
    }
    if (len !== undefined && len > budget.maxBytes) {
      return refuse(inflightTooLarge(budget, len))
    }
    if (!budget.tryAdmit(len ?? 0)) {
      return refuse(inflightOverloaded(budget))
    }
    let held = len ?? 0
    setBodyTicket(c, {
      declared: len !== undefined,
      take(n) {
        if (held + n > budget.maxBytes) {
          // This body alone passes the whole bound: it can never be served (not a 503).
          throw inflightTooLarge(budget, undefined)
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
