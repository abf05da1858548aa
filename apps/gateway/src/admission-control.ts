/**
 * The door's admission controller (docs/architecture.md#admission-target): how much of a
 * request's remaining budget the predicted finish may fill, per model and tenant, corrected by
 * what happened.
 *
 * A request is admitted when `queue wait + run time + the gateway's own delay <= left x (1 - margin)`.
 * The margin starts at its floor (default 20%). It GROWS on late outcomes (an admitted request that
 * finished past `lateFraction` (80%) of its budget, a 504, or a refusal by the worker): a quarter of
 * the way toward `maxMargin` (0.8), at most once per `windowMs`, so a burst admitted together
 * counts once. It DECAYS by the clock toward the floor with a half-life of `halfLifeMs` (2 s), so a
 * correction made during a spike does not hold back later traffic. A "good queue", a predicted wait
 * within `goodQueueRuns` (2) batch runs, is exempt from the margin: as in CoDel, a standing queue is
 * the signal, not a burst, and by Little's law a queue of two runs drains in two runs, so an idle
 * or nearly idle worker is never locked out. State is per model and tenant, so a quiet tenant is
 * judged by its own outcomes, not the flood's.
 * @module
 */

/** Default {@link AdmissionControlOptions.margin}: the floor, predicted finish within 80% of what is left. */
export const DEFAULT_ADMISSION_MARGIN = 0.2
/** Default {@link AdmissionControlOptions.maxMargin}. */
export const DEFAULT_ADMISSION_MAX_MARGIN = 0.8
/** Default {@link AdmissionControlOptions.step}: a late outcome moves the margin this share of the way to the max. */
export const DEFAULT_ADMISSION_STEP = 0.25
/** Default {@link AdmissionControlOptions.halfLifeMs}. */
export const DEFAULT_ADMISSION_HALF_LIFE_MS = 2000
/** Default {@link AdmissionControlOptions.windowMs} (CoDel's interval). */
export const DEFAULT_ADMISSION_WINDOW_MS = 100
/** Default {@link AdmissionControlOptions.lateFraction}. */
export const DEFAULT_ADMISSION_LATE_FRACTION = 0.8
/** Default {@link AdmissionControlOptions.goodQueueRuns}. */
export const DEFAULT_ADMISSION_GOOD_QUEUE_RUNS = 2
/** Most model/tenant states kept (the oldest is forgotten first: bounded memory). */
export const ADMISSION_MAX_KEYS = 1024

/** Options of {@link AdmissionControl} (`GatewayOptions.workerWait.control`). All durations in ms. */
export interface AdmissionControlOptions {
  /** The floor of the margin: fraction of a request's remaining budget kept free of predicted work, in [0, maxMargin]. @default 0.2 */
  margin?: number
  /** The largest margin late outcomes can raise it to, in [margin, 0.95]. @default 0.8 */
  maxMargin?: number
  /** Share of the way to `maxMargin` one late outcome moves the margin, in (0, 1]. @default 0.25 */
  step?: number
  /** The margin's excess over the floor halves every this many ms, > 0. @default 2000 */
  halfLifeMs?: number
  /** At most one raise per this many ms per state, >= 0. @default 100 */
  windowMs?: number
  /** An admitted request answered past this fraction of its budget counts as late, in (0, 1]. @default 0.8 */
  lateFraction?: number
  /** A predicted wait within this many batch runs is a good queue, exempt from the margin, >= 0. @default 2 */
  goodQueueRuns?: number
  /** Clock, ms. @default Date.now */
  now?: () => number
}

/** What a request admitted by the controller carries to its outcome. */
export interface AdmissionTicket {
  readonly key: string
  /** Clock ms past which an answer counts as late (`lateFraction` of its budget). */
  readonly lateAt: number
}

interface State {
  /** The margin at `at`, before decay. */
  margin: number
  at: number
  /** Clock ms of the last raise. */
  raisedAt: number
}

/** Per model and tenant, the margin of admission. */
export class AdmissionControl {
  readonly floor: number
  readonly maxMargin: number
  readonly step: number
  readonly halfLifeMs: number
  readonly windowMs: number
  readonly lateFraction: number
  readonly goodQueueRuns: number
  readonly #now: () => number
  readonly #states = new Map<string, State>()

  constructor(o: AdmissionControlOptions = {}) {
    this.floor = o.margin ?? DEFAULT_ADMISSION_MARGIN
    this.maxMargin = o.maxMargin ?? Math.max(this.floor, DEFAULT_ADMISSION_MAX_MARGIN)
    this.step = o.step ?? DEFAULT_ADMISSION_STEP
    this.halfLifeMs = o.halfLifeMs ?? DEFAULT_ADMISSION_HALF_LIFE_MS
    this.windowMs = o.windowMs ?? DEFAULT_ADMISSION_WINDOW_MS
    this.lateFraction = o.lateFraction ?? DEFAULT_ADMISSION_LATE_FRACTION
    this.goodQueueRuns = o.goodQueueRuns ?? DEFAULT_ADMISSION_GOOD_QUEUE_RUNS
    this.#now = o.now ?? Date.now
    const ok =
      this.floor >= 0 &&
      this.maxMargin >= this.floor &&
      this.maxMargin <= 0.95 &&
      this.step > 0 &&
      this.step <= 1 &&
      this.halfLifeMs > 0 &&
      this.windowMs >= 0 &&
      this.lateFraction > 0 &&
      this.lateFraction <= 1 &&
      this.goodQueueRuns >= 0
    if (!ok) {
      throw new RangeError('admissionControl: 0 <= margin <= maxMargin <= 0.95, step in (0, 1], halfLifeMs > 0, windowMs >= 0, lateFraction in (0, 1], goodQueueRuns >= 0')
    }
  }

  /** The margin for a request of `tenant` for `model` now: the floor, plus what late outcomes added, decayed by the clock. */
  margin(model: string, tenant: string): number {
    const s = this.#states.get(keyOf(model, tenant))
    return s === undefined ? this.floor : this.#decayed(keyOf(model, tenant), s)
  }

  /** The fraction of a request's time left that predicted work may fill: `1 - margin`. */
  ceiling(model: string, tenant: string): number {
    return 1 - this.margin(model, tenant)
  }

  #decayed(key: string, s: State): number {
    const m = this.floor + (s.margin - this.floor) * 0.5 ** (Math.max(0, this.#now() - s.at) / this.halfLifeMs)
    if (m - this.floor < 1e-3) {
      this.#states.delete(key) // back at the floor: forgotten
      return this.floor
    }
    return m
  }

  /**
   * Judge a prediction: `waitMs` of queued work ahead, then `runMs` (one batch run) and `delayMs`
   * (the gateway's own delay), against `leftMs`: a ticket when it fits `1 - margin` of it (all of
   * it for a good queue, `waitMs <= goodQueueRuns x runMs`), else undefined (refuse).
   */
  admit(model: string, tenant: string, waitMs: number, runMs: number, delayMs: number, leftMs: number): AdmissionTicket | undefined {
    const good = waitMs <= this.goodQueueRuns * runMs
    const ceiling = good ? 1 : this.ceiling(model, tenant)
    if (waitMs + runMs + delayMs > leftMs * ceiling) {
      return undefined
    }
    return this.ticket(model, tenant, leftMs)
  }

  /** A ticket for a request with `leftMs` to its deadline let through whatever the estimate (a probe): its outcome still counts. */
  ticket(model: string, tenant: string, leftMs: number): AdmissionTicket {
    return { key: keyOf(model, tenant), lateAt: this.#now() + leftMs * this.lateFraction }
  }

  /**
   * The outcome of an admitted request: `failed` (504, or refused by the worker) or answered past
   * its ticket's `lateAt` is late and raises the margin a `step` of the way to `maxMargin`, at most
   * once per `windowMs`; otherwise nothing (the clock brings the margin back).
   */
  outcome(t: AdmissionTicket, failed: boolean): void {
    const now = this.#now()
    if (!failed && now <= t.lateAt) {
      return
    }
    const s = this.#states.get(t.key)
    if (s !== undefined && now - s.raisedAt < this.windowMs) {
      return
    }
    const m = s === undefined ? this.floor : this.#decayed(t.key, s)
    const next = { margin: m + (this.maxMargin - m) * this.step, at: now, raisedAt: now }
    this.#states.delete(t.key)
    if (this.#states.size >= ADMISSION_MAX_KEYS) {
      this.#states.delete(this.#states.keys().next().value as string)
    }
    this.#states.set(t.key, next)
  }
}

function keyOf(model: string, tenant: string): string {
  return `${model}\u0000${tenant}`
}
