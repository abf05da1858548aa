import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'

/** The `Retry-After` of an error answer, seconds: its own, else 1 for OVERLOADED and NO_WORKER (retrying can help), else none. */
export function retryAfterOf(e: CohortError): string | undefined {
  if (e.retryAfterS !== undefined) {
    return String(Math.max(1, Math.ceil(e.retryAfterS)))
  }
  return e.code === 'OVERLOADED' || e.code === 'NO_WORKER' ? '1' : undefined
}

/** The JSON error body: `{"error": message, "code": CODE}` (OIP's `error` plus a stable code). */
export function errorBody(e: CohortError): { error: string; code: string } {
  return { error: e.message, code: e.code }
}

/** The error answer of the app: {@link errorBody} with {@link retryAfterOf} (and `WWW-Authenticate` for 401). */
export function errorResponse(c: Context, e: CohortError): Response {
  const retry = retryAfterOf(e)
  if (retry !== undefined) {
    c.header('Retry-After', retry)
  }
  if (e.code === 'UNAUTHORIZED') {
    c.header('WWW-Authenticate', 'Bearer realm="cohort"')
  }
  return c.json(errorBody(e), e.status as 400)
}

/** Anything thrown to a CohortError; unexpected errors are INTERNAL and reported once. */
export function asCohortError(e: unknown, report: (e: unknown) => void): CohortError {
  if (e instanceof CohortError) {
    return e
  }
  report(e)
  return new CohortError('INTERNAL', 'internal error')
}
