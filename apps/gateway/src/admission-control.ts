/**
 * The door's admission controller (docs/reliability.md#admission-with-a-margin): how the door
 * corrects the workers' queue-wait estimates by what happened, per model and tenant.
 *
 * A request is admitted when `queue wait x scale + run time + the gateway's own delay <= left x (1 - margin)`.
 * The margin (default 20%) is room for what the estimates miss. The scale starts at 1 and moves by
 * AIMD, as TCP's congestion window and Clipper's batch sizing do: an admitted request that finished
 * late (or was refused or timed out by the worker after the door let it in) means the wait
 * estimates are optimistic, so the scale is divided by `decrease` (multiplicative: the door
 * admits less queued work at once); one that finished in time takes `increase` off it, down to 1.
 * Only the queued wait is scaled: an idle worker's request (wait 0) is admitted whenever its run
 * fits, so the correction never locks out work the worker could do. As in TCP, one window of late
 * outcomes counts once: a late outcome raises the scale only when its request was admitted under
 * the current scale (after the last raise), so a burst admitted together does not blow it up.
 * State is per model and tenant, so a quiet tenant is judged by its own outcomes, not the flood's;
 * a state without a late outcome for `resetAfterMs` is forgotten (CoDel leaves its dropping state
 * once the queue has been good for an interval).
 * @module
 */

/** Default {@link AdmissionControlOptions.margin}: predicted finish within 80% of what is left. */
export const DEFAULT_ADMISSION_MARGIN = 0.2
/** Default {@link AdmissionControlOptions.decrease}. */
export const DEFAULT_ADMISSION_DECREASE = 0.7
/** Default {@link AdmissionControlOptions.increase}. */
export const DEFAULT_ADMISSION_INCREASE = 0.05
/** Default {@link AdmissionControlOptions.maxScale}. */
export const DEFAULT_ADMISSION_MAX_SCALE = 10
/** Default {@link AdmissionControlOptions.resetAfterMs}. */
export const DEFAULT_ADMISSION_RESET_MS = 10_000
/** Most model/tenant states kept (the oldest is forgotten first: bounded memory). */
export const ADMISSION_MAX_KEYS = 1024

/** Options of {@link AdmissionControl} (`GatewayOptions.workerWait.control`). */
export interface AdmissionControlOptions {
  /** Fraction of a request's remaining budget kept free of predicted work, in [0, 0.9]. @default 0.2 */
  margin?: number
  /** On a late outcome the scale of the queued wait is divided by this (multiplicative), in (0, 1). @default 0.7 */
  decrease?: number
  /** Taken off the scale on an on-time outcome (additive), > 0. @default 0.05 */
  increase?: number
  /** Largest scale of the queued wait, >= 1. @default 10 */
  maxScale?: number
  /**
   * A state without a late outcome for this many ms is forgotten (back to scale 1): a correction
   * made during a spike does not hold back the traffic of an hour later. @default 10000
   */
  resetAfterMs?: number
  /** Clock, ms. @default Date.now */
  now?: () => number
}

/** What a request admitted by the controller carries to its outcome. */
export interface AdmissionTicket {
  readonly key: string
  /** The state's epoch at admission (bumped by each raise). */
  readonly epoch: number
}

interface State {
  scale: number
  epoch: number
  /** When its last late outcome came (clock ms). */
  lateAt: number
}

/** Per model and tenant, the scale of the queued wait admission counts. */
export class AdmissionControl {
  readonly margin: number
  readonly decrease: number
  readonly increase: number
  readonly maxScale: number
  readonly resetAfterMs: number
  readonly #now: () => number
  readonly #states = new Map<string, State>()

  constructor(o: AdmissionControlOptions = {}) {
    this.margin = o.margin ?? DEFAULT_ADMISSION_MARGIN
    this.decrease = o.decrease ?? DEFAULT_ADMISSION_DECREASE
    this.increase = o.increase ?? DEFAULT_ADMISSION_INCREASE
    this.maxScale = o.maxScale ?? DEFAULT_ADMISSION_MAX_SCALE
    this.resetAfterMs = o.resetAfterMs ?? DEFAULT_ADMISSION_RESET_MS
    this.#now = o.now ?? Date.now
    if (!(this.margin >= 0 && this.margin <= 0.9) || !(this.decrease > 0 && this.decrease < 1) || !(this.increase > 0) || !(this.maxScale >= 1) || !(this.resetAfterMs > 0)) {
      throw new RangeError('admissionControl: margin in [0, 0.9], decrease in (0, 1), increase > 0, maxScale >= 1, resetAfterMs > 0')
    }
  }

  /** The fraction of a request's time left that predicted work may fill: `1 - margin`. */
  get ceiling(): number {
    return 1 - this.margin
  }

  /** The scale of the queued wait for a request of `tenant` for `model` now (1: the estimate as sent). */
  scale(model: string, tenant: string): number {
    return this.#state(keyOf(model, tenant))?.scale ?? 1
  }

  /** The state of `key`, unless it had no late outcome for `resetAfterMs` (then it is forgotten). */
  #state(key: string): State | undefined {
    const s = this.#states.get(key)
    if (s !== undefined && this.#now() - s.lateAt > this.resetAfterMs) {
      this.#states.delete(key)
      return undefined
    }
    return s
  }

  /**
   * Judge a prediction: `waitMs` of queued work ahead (scaled), then `fixedMs` (the run and the
   * gateway's delay), against `leftMs`: a ticket when it fits `1 - margin` of it, else undefined (refuse).
   */
  admit(model: string, tenant: string, waitMs: number, fixedMs: number, leftMs: number): AdmissionTicket | undefined {
    const key = keyOf(model, tenant)
    const s = this.#state(key)
    if (waitMs * (s?.scale ?? 1) + fixedMs > leftMs * this.ceiling) {
      return undefined
    }
    return { key, epoch: s?.epoch ?? 0 }
  }

  /** A ticket for a request let through whatever the estimate (a probe): its outcome still counts. */
  ticket(model: string, tenant: string): AdmissionTicket {
    const key = keyOf(model, tenant)
    return { key, epoch: this.#state(key)?.epoch ?? 0 }
  }

  /**
   * The outcome of an admitted request: `late` (answered past its deadline, 504, or refused by the
   * worker) raises its state's scale once per epoch; in time lowers it additively, down to 1.
   */
  outcome(t: AdmissionTicket, late: boolean): void {
    let s = this.#state(t.key)
    if (s === undefined) {
      if (!late) {
        return // already at scale 1
      }
      s = { scale: 1, epoch: t.epoch, lateAt: this.#now() }
      this.#remember(t.key, s)
    }
    if (late) {
      s.lateAt = this.#now()
      if (t.epoch === s.epoch) {
        s.scale = Math.min(this.maxScale, s.scale / this.decrease)
        s.epoch++
      }
      return
    }
    s.scale = Math.max(1, s.scale - this.increase)
  }

  #remember(key: string, s: State): void {
    if (this.#states.size >= ADMISSION_MAX_KEYS) {
      this.#states.delete(this.#states.keys().next().value as string)
    }
    this.#states.set(key, s)
  }
}

function keyOf(model: string, tenant: string): string {
  return `${model}\u0000${tenant}`
}
