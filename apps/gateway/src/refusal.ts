/**
 * Cheap refusals (docs/reliability.md#refusals-under-overload): a 503 OVERLOADED costs a counter and
 * the answer, not a log line, a NATS message or a body parse. {@link RefusalLog} aggregates the
 * refusals of one door into at most one `warn` line per `intervalMs`; {@link refusalConnection} is
 * the gateway's connection rule for an answer given before the body was read.
 * @module
 */
import type { Logger } from '@cohort/observability'

/** Default {@link RefusalLogOptions.intervalMs}: at most one refusal summary line per 10 s. */
export const DEFAULT_REFUSAL_LOG_INTERVAL_MS = 10_000

/**
 * A refused body up to this many bytes is read and discarded by the server (the keep-alive
 * connection stays open for the client's next request); a larger one, or one of unknown length,
 * is answered with `Connection: close` and a lingering close (the CLI's listener: half-close, read
 * and discard for `LINGER_MS`, then close, as nginx does), so the client reads the answer instead
 * of a reset.
 */
export const DRAIN_REFUSED_BYTES = 64 * 1024

/** Options of {@link RefusalLog}. */
export interface RefusalLogOptions {
  /** At most one summary line per this many ms (the first refusal after a quiet spell is logged at once). @default 10000 */
  intervalMs?: number
  /** Clock, ms. @default Date.now */
  now?: () => number
  /** The summary line's message. @default the refusals' ({@link REFUSAL_SUMMARY}) */
  message?: string
}

/** The message of the refusals' summary line. */
export const REFUSAL_SUMMARY = 'requests refused (overload): 503 OVERLOADED, counted in cohort_door_refusals_total'

/**
 * The message of the deadline failures' summary line: a request admitted that then ran out of time
 * (504 DEADLINE_EXCEEDED) or whose deadline the model can never meet (400 DEADLINE_TOO_SHORT). Under
 * overload these come by the thousand, like refusals, so they are aggregated the same way.
 */
export const DEADLINE_SUMMARY = 'requests failed by their deadline: 504 DEADLINE_EXCEEDED, 400 DEADLINE_TOO_SHORT, counted in cohort_requests_total'

/** The codes aggregated in the deadline failures' summary line instead of a line each. */
export const DEADLINE_CODES: ReadonlySet<string> = new Set(['DEADLINE_EXCEEDED', 'DEADLINE_TOO_SHORT'])

/**
 * Aggregated logging of refusals: each refusal is counted (by check); a `warn` line
 * `requests refused (overload)` with the counts since the previous line is written when a refusal
 * comes at least `intervalMs` after that line. So a flood of any size writes one line per
 * `intervalMs`, and the first refusal after a quiet spell is seen at once. Counts are also in
 * `cohort_door_refusals_total` and `cohort_requests_total{code="OVERLOADED"}`.
 */
export class RefusalLog {
  readonly intervalMs: number
  readonly #now: () => number
  readonly #message: string
  #last = -Infinity
  #byCheck: Record<string, number> = {}
  #total = 0

  constructor(
    readonly logger: Logger,
    o: RefusalLogOptions = {},
  ) {
    this.intervalMs = o.intervalMs ?? DEFAULT_REFUSAL_LOG_INTERVAL_MS
    this.#now = o.now ?? Date.now
    this.#message = o.message ?? REFUSAL_SUMMARY
    if (!(this.intervalMs >= 0)) {
      throw new RangeError('refusalLogIntervalMs must be >= 0')
    }
  }

  /** Refusals counted since this log was made. */
  get total(): number {
    return this.#total
  }

  /** Count one refusal by `check` (a door check, `worker` for a worker's own, or an error code); log when due. */
  note(check: string, model: string): void {
    this.#total++
    this.#byCheck[check] = (this.#byCheck[check] ?? 0) + 1
    const now = this.#now()
    if (now - this.#last < this.intervalMs && now >= this.#last) {
      return
    }
    const windowMs = Number.isFinite(this.#last) ? now - this.#last : 0
    this.#last = now
    const byCheck = this.#byCheck
    const refused = Object.values(byCheck).reduce((a, b) => a + b, 0)
    this.#byCheck = {}
    this.logger.warn({ refused, byCheck, windowMs, lastModel: model }, this.#message)
  }
}

/**
 * Whether an answer given before a request's body was read must close the connection: a body of
 * unknown length (chunked) or over {@link DRAIN_REFUSED_BYTES}. A request without a body, or a
 * small one (the server reads and discards it), keeps its keep-alive connection.
 */
export function closesConnection(method: string, contentLength: string | undefined, transferEncoding: string | undefined): boolean {
  if (method !== 'POST' && method !== 'PUT' && method !== 'PATCH') {
    return false
  }
  if (contentLength === undefined || contentLength === '') {
    return transferEncoding !== undefined && transferEncoding !== ''
  }
  const n = Number(contentLength)
  return !Number.isFinite(n) || n > DRAIN_REFUSED_BYTES
}
