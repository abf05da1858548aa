/**
 * Admission at the door, per origin: which of the door's steps a call of each origin passes. The
 * door runs them itself (docs/architecture.md#the-inference-door), in a fixed order: the model
 * name, the in-flight bound, the event-loop-lag check, then the worker-wait check as soon as the
 * model is known (before the body is read when the call names it up front, else before its first
 * send). Codecs choose their origin, never the steps.
 * @module
 */
import { answerError, CohortError, isValidModelName, isValidVersion } from '@cohort/protocol'
import type { InflightBudget } from '@cohort/transport'
import type { AdmissionTicket } from './admission-control.ts'
import type { DoorCheck } from './wait-check.ts'

/** Where a call comes from: its codec, or the in-gateway producer of the work. */
export type Origin = 'infer' | 'generate' | 'openai' | 'predictions' | 'bulk' | 'grpc' | 'job' | 'bridge' | 'submit'

/** The admission of one origin. */
export interface AdmissionPolicy {
  /** The event-loop-lag and worker-wait checks (503 OVERLOADED + Retry-After). */
  readonly checks: boolean
  /**
   * Who holds the call's room in the in-flight bound: HTTP's middleware (before the route, for
   * every request with a body), the door itself (from {@link Arrival.holdBytes}), or nobody (work
   * bounded where it is produced: the jobs' `maxInMemory`, the bridge's `--concurrency`).
   */
  readonly inflight: 'middleware' | 'door' | 'none'
  /**
   * The budget the worker-wait check judges: the request's (`requestTimeoutMs`, shortened by the
   * client), or the call's own deadline (jobs and bridge entries carry theirs: `predictions.timeoutMs`,
   * the bridge's `--timeout-ms`).
   */
  readonly budget: 'request' | 'own'
}

/**
 * The admission of every origin. Everything that runs inference passes both checks; only
 * `submit` (an async prediction queued, answered 202 whatever the load) does not: its run does,
 * as a `job`.
 */
export const ADMISSION: Readonly<Record<Origin, AdmissionPolicy>> = Object.freeze({
  infer: { checks: true, inflight: 'middleware', budget: 'request' },
  generate: { checks: true, inflight: 'middleware', budget: 'request' },
  openai: { checks: true, inflight: 'middleware', budget: 'request' },
  predictions: { checks: true, inflight: 'middleware', budget: 'request' },
  bulk: { checks: true, inflight: 'middleware', budget: 'request' },
  grpc: { checks: true, inflight: 'door', budget: 'request' },
  job: { checks: true, inflight: 'none', budget: 'own' },
  bridge: { checks: true, inflight: 'none', budget: 'own' },
  submit: { checks: false, inflight: 'middleware', budget: 'request' },
})

/** Check a model name and version from a path (or a message): 404 MODEL_NOT_FOUND naming it. */
export function checkModelPath(model: string, version: string | undefined): void {
  if (!isValidModelName(model)) {
    throw new CohortError('MODEL_NOT_FOUND', `"${model}" is not a valid model name`)
  }
  if (version !== undefined && !isValidVersion(version)) {
    throw new CohortError('MODEL_NOT_FOUND', `model "${model}" has no version "${version}" (versions are positive integers: 1, 2, ...)`)
  }
}

/** 503 OVERLOADED of the in-flight bound (retrying can help: room comes back). */
export function inflightOverloaded(budget: InflightBudget): CohortError {
  return answerError('OVERLOADED', `the gateway is at its in-flight bound: ${budget.describe()}; retry later`, { retryAfterS: 1 })
}

/** 413 of a body larger than the whole bytes bound: it can never be served. */
export function inflightTooLarge(budget: InflightBudget, bytes: number | undefined, why = '', over = budget.maxBytes): CohortError {
  const size = bytes === undefined ? `more than ${over} bytes` : `${bytes} bytes`
  return new CohortError('PAYLOAD_TOO_LARGE', `request body of ${size} exceeds the gateway's in-flight bytes bound (maxBytes) of ${budget.maxBytes} bytes${why}`)
}

/**
 * The door's judgement of a call before its body is read (`InferenceDoor.admit`, door.ts): admitted,
 * with the delay to take off its deadline and the admission controller's ticket, or refused by one
 * check (503 OVERLOADED for load, 400 DEADLINE_TOO_SHORT).
 */
export type Admission =
  | {
      refused?: undefined
      /** The delay taken off the deadline: the larger of the event-loop lag and the arrival wait, ms. */
      lag: number
      /** The event loop's lag at entry, ms. */
      loopLag: number
      /** The worker-wait check ran (or does not apply): false while the model is not known. */
      judged: boolean
      ticket?: AdmissionTicket | undefined
      probe?: boolean | undefined
    }
  | { refused: CohortError; check: DoorCheck }
