/**
 * The one registry of Cohort's error codes. Every error that crosses a process boundary
 * (NATS reply, HTTP response) carries one of these codes; the HTTP status comes from here.
 * `docs/errors.md` lists the same codes (a test keeps them in sync).
 * @module
 */
import type { WireError } from './envelope.ts'

/** Code -> HTTP status and a one-line meaning. */
export const ERROR_CODES = {
  BAD_REQUEST: { status: 400, doc: 'The request is malformed: unreadable JSON, missing fields, bad tensor data.' },
  INVALID_INPUT: { status: 400, doc: 'An item does not match the model: wrong input names, datatype, shape, or schema.' },
  UNAUTHORIZED: { status: 401, doc: 'Credentials are missing or wrong.' },
  FORBIDDEN: { status: 403, doc: 'Credentials are valid but not allowed to do this.' },
  DEADLINE_TOO_SHORT: {
    status: 400,
    doc: "The request's deadline is shorter than the model needs to run it even alone on an idle worker (its learned time for the item); the message names both. Retrying with the same deadline cannot help: send a longer one.",
  },
  MODEL_NOT_FOUND: { status: 404, doc: 'No model of that name is known.' },
  MODEL_LOAD_FAILED: {
    status: 400,
    doc: 'A model repository load left no version of the model serving: every version it tried failed to load (a broken model file, a bad config.json); the message says why. Nothing that served before was stopped.',
  },
  NOT_FOUND: { status: 404, doc: 'No such route.' },
  PREDICTION_NOT_FOUND: { status: 404, doc: 'No async prediction with that id is known (never created, or expired).' },
  CONFLICT: { status: 409, doc: 'The id is taken by a different request (an idempotent PUT with another input).' },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    doc: 'The request body or its encoded message exceeds a size limit (the HTTP body limit `maxBodyBytes`, or the bus message limit `maxMessageBytes`).',
  },
  RESPONSE_TOO_LARGE: { status: 413, doc: 'The reply would exceed the bus message limit `maxMessageBytes`; send fewer items per request.' },
  TOO_MANY_ITEMS: {
    status: 413,
    doc: "The request holds more items (rows) than the model can ever queue at once (`maxQueue`, or its tenant's `maxTenantQueue`); the message names the bound and its value. Retrying unchanged cannot help: split the request.",
  },
  RATE_LIMITED: { status: 429, doc: 'A per-client rate limit was hit; see Retry-After.' },
  CANCELLED: { status: 499, doc: 'The client went away before its items ran; they were dropped.' },
  PREDICTOR_FAILED: { status: 500, doc: 'The predictor threw or failed this item.' },
  INTERNAL: { status: 500, doc: 'An unexpected failure inside Cohort.' },
  NO_WORKER: { status: 503, doc: 'No worker is serving the model right now (NATS had no responders).' },
  OVERLOADED: {
    status: 503,
    doc: 'The request cannot be taken now: the gateway or worker holds its in-flight bound of requests or bytes, the queue of the model is full, or admission estimated it would finish after its deadline. Answered at once; retry after Retry-After seconds.',
  },
  SHUTTING_DOWN: { status: 503, doc: 'The process is draining and takes no new work.' },
  WORKER_LOST: { status: 503, doc: 'The worker holding the request stopped sending heartbeats (crashed or cut off); retry after Retry-After seconds.' },
  REPLY_LOST: { status: 503, doc: 'The NATS connection moved to another server while the request was in flight and its reply did not come; retry after Retry-After seconds.' },
  JOBS_UNAVAILABLE: { status: 503, doc: 'Async predictions need NATS JetStream, which the server does not offer.' },
  NOT_READY: { status: 503, doc: 'The model is still loading.' },
  BLOB_UNAVAILABLE: { status: 503, doc: 'A large message could not be pulled from its sender (sender gone, message expired, or a chunk missing or truncated).' },
  BATCH_TIMEOUT: { status: 504, doc: "The item's batch ran past its model's time limit; it was stopped and its runner restarted. It may or may not have had side effects." },
  DEADLINE_EXCEEDED: { status: 504, doc: 'The deadline passed before the item could be answered; it was not run, or its result came too late.' },
} as const satisfies Record<string, { status: number; doc: string }>

/** A stable error code. */
export type ErrorCode = keyof typeof ERROR_CODES

/** True when `code` is a registered code. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code)
}

/** HTTP status for a code; 500 for unknown codes. */
export function statusOf(code: string): number {
  return isErrorCode(code) ? ERROR_CODES[code].status : 500
}

/** Options of {@link CohortError}. */
export interface CohortErrorOptions extends ErrorOptions {
  /** Seconds for a `Retry-After` header (503/429). */
  retryAfterS?: number
}

/** The one error class that carries a registered code and its HTTP status. */
export class CohortError extends Error {
  override name = 'CohortError'
  readonly code: ErrorCode
  readonly status: number
  readonly retryAfterS: number | undefined

  constructor(code: ErrorCode, message: string, options?: CohortErrorOptions) {
    super(message, options)
    this.code = code
    this.status = ERROR_CODES[code].status
    this.retryAfterS = options?.retryAfterS
  }

  /** The wire form `{code, message}` (plus `retryAfterS` when set). */
  toWire(): WireError {
    return this.retryAfterS !== undefined ? { code: this.code, message: this.message, retryAfterS: this.retryAfterS } : { code: this.code, message: this.message }
  }
}

/** Rebuild a {@link CohortError} from its wire form; unknown codes become INTERNAL. */
export function fromWire(w: WireError): CohortError {
  const code = isErrorCode(w.code) ? w.code : 'INTERNAL'
  return new CohortError(code, w.message, w.retryAfterS !== undefined ? { retryAfterS: w.retryAfterS } : undefined)
}

/** Any thrown value to the wire form; non-Cohort errors become `fallback` (default INTERNAL). */
export function toWireError(e: unknown, fallback: ErrorCode = 'INTERNAL'): WireError {
  if (e instanceof CohortError) {
    return e.toWire()
  }
  const message = e instanceof Error ? e.message : String(e)
  return { code: fallback, message }
}

/**
 * A {@link CohortError} without a stack trace, for an answer the server gives by design and often:
 * a refusal for load, a deadline too short. Capturing a stack costs microseconds per error (more
 * under a flood, with deep async frames) and says nothing about such an answer.
 */
export function answerError(code: ErrorCode, message: string, options?: CohortErrorOptions): CohortError {
  const limit = StackLimited.stackTraceLimit
  if (typeof limit !== 'number') {
    return new CohortError(code, message, options) // a runtime without V8's stack limit
  }
  StackLimited.stackTraceLimit = 0
  try {
    return new CohortError(code, message, options)
  } finally {
    StackLimited.stackTraceLimit = limit
  }
}

/** `Error` with V8's (and JavaScriptCore's) `stackTraceLimit`, which the libraries' types do not declare. */
const StackLimited = Error as ErrorConstructor & { stackTraceLimit?: number }

/** Shorthand for `new CohortError(...)`. */
export function cohortError(code: ErrorCode, message: string, options?: CohortErrorOptions): CohortError {
  return new CohortError(code, message, options)
}
