/**
 * The door's admission controller (docs/reliability.md#admission-with-a-margin): how much of a
 * request's budget the predicted finish may use, per model and tenant, corrected by outcomes.
 *
 * A request is admitted when `queue wait + run time + the gateway's own delay <= left * fraction`.
 * The fraction starts at `1 - margin` (the margin: room for what the estimates miss) and moves by
 * AIMD, as TCP's congestion window and Clipper's batch sizing: an admitted request that finished
 * late (or was refused or timed out by the worker after the door let it in) means the estimates
 * are optimistic, so the fraction is multiplied by `decrease`; one that finished in time adds
 * `increase`, up to `1 - margin`. As in TCP, one window of late outcomes counts once: a late
 * outcome decreases the fraction only when its request was admitted under the current fraction
 * (admitted after the last decrease), so a burst admitted together does not collapse it. State is
 * per model and tenant, so a quiet tenant is judged by its own outcomes, not the flood's. Pure.
 * @module
 */

/** Default {@link AdmissionControlOptions.margin}: predicted finish within 80% of what is left. */
export const DEFAULT_ADMISSION_MARGIN = 0.2
/** Default {@link AdmissionControlOptions.decrease}. */
export const DEFAULT_ADMISSION_DECREASE = 0.7
/** Default {@link AdmissionControlOptions.increase}. */
export const DEFAULT_ADMISSION_INCREASE = 0.02
/** Default {@link AdmissionControlOptions.floor}. */
export const DEFAULT_ADMISSION_FLOOR = 0.1
/** Default {@link AdmissionControlOptions.resetAfterMs}. */
export const DEFAULT_ADMISSION_RESET_MS = 10_000
/** Most model/tenant states kept (the oldest is forgotten first: bounded memory). */
export const ADMISSION_MAX_KEYS = 1024

/** Options of {@link AdmissionControl} (`GatewayOptions.admissionControl`). */
export interface AdmissionControlOptions {
  /** Fraction of a request's remaining budget kept free of predicted work, in [0, 0.9]. @default 0.2 */
  margin?: number
  /** Factor applied to the fraction on a late outcome (multiplicative decrease), in (0, 1). @default 0.7 */
  decrease?: number
  /** Added to the fraction on an on-time outcome (additive increase), > 0. @default 0.02 */
  increase?: number
  /** Lowest fraction, in (0, 1 - margin]. @default 0.1 */
  floor?: number
  /**
   * A state without a late outcome for this many ms is forgotten (back to `1 - margin`), as CoDel
   * leaves its dropping state once the queue has been good for an interval: a fraction cut during
   * a spike does not hold back the traffic of an hour later. @default 10000
   */
  resetAfterMs?: number
  /** Clock, ms. @default Date.now */
  now?: () => number
}

/** What a request admitted by the controller carries to its outcome. */
export interface AdmissionTicket {
  readonly key: string
  /** The state's epoch at admission (bumped by each decrease). */
  readonly epoch: number
}

interface State {
  fraction: number
  epoch: number
  /** When its last late outcome came (clock ms). */
  lateAt: number
}

/** Per model and tenant, the fraction of the budget admission may fill. */
export class AdmissionControl {
  readonly margin: number
  readonly decrease: number
  readonly increase: number
  readonly floor: number
  readonly resetAfterMs: number
  readonly #now: () => number
  readonly #states = new Map<string, State>()

  constructor(o: AdmissionControlOptions = {}) {
    this.margin = o.margin ?? DEFAULT_ADMISSION_MARGIN
    this.decrease = o.decrease ?? DEFAULT_ADMISSION_DECREASE
    this.increase = o.increase ?? DEFAULT_ADMISSION_INCREASE
    this.floor = Math.min(o.floor ?? DEFAULT_ADMISSION_FLOOR, 1 - this.margin)
    this.resetAfterMs = o.resetAfterMs ?? DEFAULT_ADMISSION_RESET_MS
    this.#now = o.now ?? Date.now
    if (!(this.margin >= 0 && this.margin <= 0.9) || !(this.decrease > 0 && this.decrease < 1) || !(this.increase > 0) || !(this.floor > 0) || !(this.resetAfterMs > 0)) {
      throw new RangeError('admissionControl: margin in [0, 0.9], decrease in (0, 1), increase > 0, floor > 0, resetAfterMs > 0')
    }
  }

  /** The most the fraction can be: `1 - margin`. */
  get ceiling(): number {
    return 1 - this.margin
  }

  /** The fraction of its remaining budget a request of `tenant` for `model` may fill now. */
  fraction(model: string, tenant: string): number {
    return this.#state(keyOf(model, tenant))?.fraction ?? this.ceiling
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
   * Judge a predicted finish (`predictedMs` from now) against `leftMs`: a ticket when it fits the
   * fraction of this model and tenant, else undefined (refuse).
   */
  admit(model: string, tenant: string, predictedMs: number, leftMs: number): AdmissionTicket | undefined {
    const key = keyOf(model, tenant)
    const s = this.#state(key)
    const fraction = s?.fraction ?? this.ceiling
    if (predictedMs > leftMs * fraction) {
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
   * worker) decreases its state's fraction once per epoch; in time increases it additively.
   */
  outcome(t: AdmissionTicket, late: boolean): void {
    let s = this.#state(t.key)
    if (s === undefined) {
      if (!late) {
        return // already at the ceiling
      }
      s = { fraction: this.ceiling, epoch: t.epoch, lateAt: this.#now() }
      this.#remember(t.key, s)
    }
    if (late) {
      s.lateAt = this.#now()
      if (t.epoch === s.epoch) {
        s.fraction = Math.max(this.floor, s.fraction * this.decrease)
        s.epoch++
      }
      return
    }
    s.fraction = Math.min(this.ceiling, s.fraction + this.increase)
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
