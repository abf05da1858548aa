/**
 * The door's worker-wait check (docs/batching.md#admission-at-the-door): refuse a request before
 * its body is read, without a NATS round trip, when no worker can finish it before its deadline by
 * the workers' own queue-wait estimates ({@link WorkerWaits}). The second of the door's two checks;
 * the first, the event-loop-lag check, is `admitAtDoor` in lag-check.ts. The worker's admission
 * stays the exact check: this one refuses only what it would refuse, by estimates it sent.
 * @module
 */
import { answerError, type CohortError } from '@cohort/protocol'
import type { WorkerWaits } from './wait-table.ts'
import { AdmissionControl, type AdmissionControlOptions, type AdmissionTicket } from './admission-control.ts'

/** The door's checks, as named in code, in the `check` label of `cohort_door_refusals_total` and in the docs. */
export const DOOR_CHECKS = { eventLoopLag: 'event_loop_lag', arrivalWait: 'arrival_wait', workerWait: 'worker_wait' } as const
/** One of {@link DOOR_CHECKS}. */
export type DoorCheck = (typeof DOOR_CHECKS)[keyof typeof DOOR_CHECKS]

/** Options of the worker-wait check (`GatewayOptions.workerWait`; `false` turns it off). All durations in ms. */
export interface WorkerWaitOptions {
  /**
   * While every fresh estimate says a model's requests would be late, still let one through every
   * this many ms (per model and gateway), so the worker's exact check judges it and the estimates
   * refresh. @default 100
   */
  probeIntervalMs?: number
  /** An estimate is used for this many of its worker's heartbeat intervals after it came, then dropped. @default 2 */
  staleHeartbeats?: number
  /** The margin and the outcome feedback of admission (admission-control.ts). @default {} */
  control?: AdmissionControlOptions
}

/** Default {@link WorkerWaitOptions.probeIntervalMs}. */
export const DEFAULT_PROBE_INTERVAL_MS = 100
/** Default {@link WorkerWaitOptions.staleHeartbeats}. */
export const DEFAULT_STALE_HEARTBEATS = 2

/** What the check decided for one request. */
export type WaitVerdict = { admit: true; probe?: true; ticket?: AdmissionTicket } | { admit: false; error: CohortError }

/** The worker-wait check of one door. */
export class WorkerWaitCheck {
  readonly probeIntervalMs: number
  readonly staleHeartbeats: number
  /** The margin and outcome feedback: how much of the budget the predicted finish may fill. */
  readonly control: AdmissionControl
  /** Last probe per model (clock ms); bounded by the models the state knows. */
  readonly #probes = new Map<string, number>()

  constructor(
    readonly waits: WorkerWaits,
    o: WorkerWaitOptions = {},
  ) {
    this.probeIntervalMs = o.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS
    this.staleHeartbeats = o.staleHeartbeats ?? DEFAULT_STALE_HEARTBEATS
    this.control = new AdmissionControl({ now: waits.now, ...o.control })
    if (!(this.probeIntervalMs >= 0) || !(this.staleHeartbeats > 0)) {
      throw new RangeError('workerWait: probeIntervalMs >= 0 and staleHeartbeats > 0')
    }
  }

  /**
   * Judge a request of `tenant` ('' anonymous) for `model` with `leftMs` to its deadline, the
   * gateway's own delay `delayMs` (its reply waits about as long as the request did): admitted
   * when the predicted finish, the best worker's wait plus its service estimate plus `delayMs`,
   * fits `1 - margin` of `leftMs` (the margin of this model and tenant, grown by late outcomes;
   * none for a good queue: {@link AdmissionControl}); else refused 503 OVERLOADED with
   * Retry-After (retrying can help). Admitted when nothing fresh is known, when even an idle
   * worker could not finish it (`leftMs` below the service estimate: the worker answers that
   * exactly, a retry would not help), and as a probe once per `probeIntervalMs` per model. A
   * request admitted because it fits is added to the waits (one item; {@link WorkerWaits.admitted}),
   * so a burst between two estimates is refused once the work this door let in would make it
   * late. An admitted request judged by estimates carries a ticket: its outcome goes back to the
   * controller ({@link AdmissionControl.outcome}). A `budgetMs` (the call's whole budget, before
   * the gateway's own delay) below what every fresh worker needs to run the item alone is refused
   * 400 DEADLINE_TOO_SHORT: no retry with that deadline can be served.
   */
  judge(model: string, tenant: string, leftMs: number, delayMs = 0, budgetMs = leftMs): WaitVerdict {
    const best = this.waits.best(model, tenant, this.staleHeartbeats)
    if (best?.aloneMs !== undefined && budgetMs < best.aloneMs) {
      return { admit: false, error: tooShort(model, best.aloneMs, budgetMs) }
    }
    if (best === undefined || leftMs < best.serviceMs) {
      return { admit: true }
    }
    const ticket = this.control.admit(model, tenant, best.waitMs, best.serviceMs, delayMs, leftMs)
    if (ticket !== undefined) {
      this.waits.admitted(model, tenant, 1)
      return { admit: true, ticket }
    }
    const now = this.waits.now()
    const last = this.#probes.get(model)
    if (last === undefined || now - last >= this.probeIntervalMs || now < last) {
      this.#probes.delete(model)
      this.#probes.set(model, now)
      if (this.#probes.size > 1024) {
        this.#probes.delete(this.#probes.keys().next().value as string)
      }
      return { admit: true, probe: true, ticket: this.control.ticket(model, tenant, leftMs) }
    }
    return {
      admit: false,
      error: answerError(
        'OVERLOADED',
        `model "${model}": no worker can finish this request well within its deadline (best of ${best.workers} worker${best.workers === 1 ? '' : 's'}: about ${Math.ceil(best.waitMs)} ms of queued work and ${Math.ceil(best.serviceMs)} ms to run it, ${Math.floor(leftMs)} ms left, of which admission fills at most ${Math.round(this.control.ceiling(model, tenant) * 100)}%); refused at the door (worker-wait check), retry after Retry-After`,
        { retryAfterS: Math.max(1, Math.ceil(best.waitMs / 1000)) },
      ),
    }
  }
}

/** 400 DEADLINE_TOO_SHORT: `model` needs `aloneMs` to run an item alone, the call's budget is `budgetMs`. */
function tooShort(model: string, aloneMs: number, budgetMs: number): CohortError {
  const need = Math.ceil(aloneMs)
  return answerError(
    'DEADLINE_TOO_SHORT',
    `model "${model}" needs about ${need} ms to run this item even alone on an idle worker, and its deadline left ${Math.floor(budgetMs)} ms; it was not sent: send a deadline of at least ${need} ms`,
  )
}
