import { status, Metadata, type ServiceError } from '@grpc/grpc-js'
import { CohortError } from '@cohort/protocol'

/** gRPC status code for an HTTP status of the error registry (libs/protocol/src/errors.ts). */
export function grpcCode(httpStatus: number): status {
  switch (httpStatus) {
    case 400:
    case 413:
    case 422:
      return status.INVALID_ARGUMENT
    case 401:
      return status.UNAUTHENTICATED
    case 403:
      return status.PERMISSION_DENIED
    case 404:
      return status.NOT_FOUND
    case 409:
      return status.ALREADY_EXISTS
    case 429:
      return status.RESOURCE_EXHAUSTED
    case 499:
      return status.CANCELLED
    case 503:
      return status.UNAVAILABLE
    case 504:
      return status.DEADLINE_EXCEEDED
    default:
      return status.INTERNAL
  }
}

/**
 * gRPC status of an error code, as Triton answers the same condition: a refusal for capacity
 * (OVERLOADED: a full queue, admission, either door check; RATE_LIMITED) is RESOURCE_EXHAUSTED,
 * a missing or lost server (NO_WORKER, WORKER_LOST, REPLY_LOST, SHUTTING_DOWN, NOT_READY, ...)
 * UNAVAILABLE, a passed deadline DEADLINE_EXCEEDED; other codes by their HTTP status ({@link grpcCode}).
 */
export function grpcStatusOf(e: Pick<CohortError, 'code' | 'status'>): status {
  switch (e.code) {
    case 'OVERLOADED':
    case 'RATE_LIMITED':
      return status.RESOURCE_EXHAUSTED
    case 'DEADLINE_EXCEEDED':
      return status.DEADLINE_EXCEEDED
    default:
      return grpcCode(e.status)
  }
}

/**
 * A CohortError as a gRPC error: the status code of {@link grpcStatusOf}, the message as details, and the stable
 * code (plus Retry-After when known) as trailing metadata `cohort-code` / `retry-after`, and the
 * same wait as `grpc-retry-pushback-ms` (gRFC A6: a retrying gRPC client honours it).
 */
export function toServiceError(e: unknown, report: (e: unknown) => void): Partial<ServiceError> {
  const err = e instanceof CohortError ? e : (report(e), new CohortError('INTERNAL', 'internal error'))
  const metadata = new Metadata()
  metadata.set('cohort-code', err.code)
  if (err.retryAfterS !== undefined) {
    const s = Math.max(1, Math.ceil(err.retryAfterS))
    metadata.set('retry-after', String(s))
    // gRFC A6's retry pushback: grpc clients with a retry policy wait this long before retrying.
    metadata.set('grpc-retry-pushback-ms', String(s * 1000))
  }
  return { code: grpcStatusOf(err), details: err.message, metadata }
}
