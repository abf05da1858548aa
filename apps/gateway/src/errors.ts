import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'

/** The JSON error body: `{"error": message, "code": CODE}` (OIP's `error` plus a stable code). */
export function errorResponse(c: Context, e: CohortError): Response {
  if (e.retryAfterS !== undefined) {
    c.header('Retry-After', String(Math.max(1, Math.ceil(e.retryAfterS))))
  } else if (e.code === 'OVERLOADED' || e.code === 'NO_WORKER') {
    c.header('Retry-After', '1')
  }
  if (e.code === 'UNAUTHORIZED') {
    c.header('WWW-Authenticate', 'Bearer realm="cohort"')
  }
  return c.json({ error: e.message, code: e.code }, e.status as 400)
}

/** Anything thrown to a CohortError; unexpected errors are INTERNAL and reported once. */
export function asCohortError(e: unknown, report: (e: unknown) => void): CohortError {
  if (e instanceof CohortError) {
    return e
  }
  report(e)
  return new CohortError('INTERNAL', 'internal error')
}
