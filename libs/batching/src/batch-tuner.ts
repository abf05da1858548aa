/**
 * The self-tuned batch cap: the engine's largest batch moves within `[1, maxBatchSize]` to the
 * size that serves the most items per second, as long as a batch of that size still leaves the
 * queued items inside their latency budget.
 * @module
 */

/**
 * Why the batch cap changed.
 * - `'explore'`: batches kept filling the cap, so the next size up is tried.
 * - `'throughput'`: the size tried served fewer than `1 + minGain` times the items per second of
 *   the size below, so the cap went back down (and the larger size is left alone for a hold that
 *   doubles with each rejection in a row, up to `holdBatches`).
 * - `'budget'`: twice the upper estimate of a batch at the cap exceeded the tightest latency budget
 *   (`deadline − arrival`) among recent items, so the cap went down.
 * - `'limit'`: `maxBatchSize` (the limit) changed and the cap was clamped or reset.
 */
export type CapReason = 'explore' | 'throughput' | 'budget' | 'limit'

/** Every `CapReason`, as a value. */
export const CAP_REASONS = ['explore', 'throughput', 'budget', 'limit'] as const satisfies readonly CapReason[]

/** One change of the cap, with the figures that justified it. */
export interface CapChange {
  from: number
  to: number
  reason: CapReason
  /** Engine time of the change (ms). */
  at: number
  /** Measured items/ms at `from` (NaN when unmeasured). */
  fromRate: number
  /** Measured items/ms at `to` (NaN when unmeasured). */
  toRate: number
  /** The latency budget in force (ms; Infinity when no item had a finite deadline). */
  budgetMs: number
}

/** Options of `new BatchTuner()`. */
export interface BatchTunerOptions {
  /** The hard cap: `maxBatchSize`. An integer >= 1. */
  limit: number
  /**
   * First cap (clamped to the limit).
   * @default 32
   */
  start?: number
  /**
   * Full batches at the cap before it is judged (and before a size up is tried). An integer >= 1.
   * @default 8
   */
  samples?: number
  /**
   * Smallest relative gain in items per second that justifies the larger size (> -1).
   * @default 0.05
   */
  minGain?: number
  /**
   * Most batches after a `'throughput'` step down before the size above is tried again. An integer
   * >= 0. The first rejection of a size holds it for `min(4 · samples, holdBatches)` batches and
   * each further rejection in a row doubles that, up to `holdBatches`: a judgment made on noisy
   * batches (a cold process, a busy machine) costs a few dozen batches, not minutes, while a size
   * that keeps losing is soon tried only every `holdBatches` batches.
   * @default 512
   */
  holdBatches?: number
  /**
   * Recent batches whose tightest item budget forms the latency budget. An integer >= 1.
   * @default 32
   */
  budgetWindow?: number
}

/** Measured service time of one size level. */
interface Level {
  size: number
  /** Mean ms of full batches at this size (a running mean that turns into an EWMA). */
  ms: number
  /** Batches folded into `ms` since the level was (re)entered. */
  n: number
  /** Batch count before which a size up from here may not be tried (after a step down). */
  heldUntil: number
  /** `'throughput'` rejections of this level in a row (reset once it is kept). */
  rejected: number
}

/** Weight of the newest sample once a level has this many: an EWMA with alpha 1/20. */
const EWMA_SAMPLES = 20

/** Default first cap: the fixed default of earlier versions. */
export const DEFAULT_START_CAP = 32

/**
 * The size levels the cap moves over: powers of two below `limit`, and `limit` itself.
 */
export function capLevels(limit: number): number[] {
  const out: number[] = []
  for (let s = 1; s < limit; s *= 2) {
    out.push(s)
  }
  out.push(limit)
  return out
}

/**
 * Moves the batch cap over `capLevels(limit)` by measurement (hill climbing on items per second,
 * one level at a time):
 *
 * - The time of a batch is measured per level from batches that filled the cap exactly (under
 *   load they all do), so the curve t(b) is piecewise, one point per level: it holds whatever
 *   shape the model has (falling per-item cost that saturates, or rises again past the cache).
 * - **Budget first.** The latency budget is the tightest `deadline − arrival` among the items of
 *   the last `budgetWindow` batches. Under saturation an item waits for the batch that is running
 *   and then runs in its own, so the cap must satisfy `2 · U(cap) <= budget`, where `U` is the
 *   level's mean time times the cost model's tail ratio (a larger, unmeasured level is estimated
 *   proportionally from the largest measured one below, which over-estimates an affine cost). A
 *   violation moves the cap one level down at once.
 * - **Explore** one level up after `samples` full batches at the cap, when that level fits the
 *   budget and is not held.
 * - **Judge** a level after `samples` full batches: if it serves fewer than `(1 + minGain)` times
 *   the items per second of the level below, go back down and hold the level above for
 *   `4 · samples` batches, doubling with each rejection of it in a row up to `holdBatches`
 *   (the first judgments run on a cold process). Otherwise stay, and explore further once
 *   batches keep filling it.
 *
 * Without load (batches smaller than the cap) nothing changes: the cap does not bind.
 */
export class BatchTuner {
  readonly #samples: number
  readonly #minGain: number
  readonly #hold: number
  readonly #budgetWindow: number
  readonly #startCap: number
  #limit = 1
  #levels: Level[] = []
  #index = 0
  #batches = 0
  #budgets: number[] = []
  #last: CapChange | undefined
  readonly #changes: Record<CapReason, number> = { explore: 0, throughput: 0, budget: 0, limit: 0 }

  /** @throws RangeError on an option outside its documented range. */
  constructor(opts: BatchTunerOptions) {
    const { start = DEFAULT_START_CAP, samples = 8, minGain = 0.05, holdBatches = 512, budgetWindow = 32 } = opts
    for (const [name, v, min] of [
      ['samples', samples, 1],
      ['holdBatches', holdBatches, 0],
      ['budgetWindow', budgetWindow, 1],
      ['start', start, 1],
    ] as const) {
      if (!Number.isInteger(v) || v < min) {
        throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`)
      }
    }
    if (!(minGain > -1 && minGain < Infinity)) {
      throw new RangeError(`minGain must be a finite number > -1, got ${String(minGain)}`)
    }
    this.#samples = samples
    this.#minGain = minGain
    this.#hold = holdBatches
    this.#budgetWindow = budgetWindow
    this.#startCap = start
    this.#reset(opts.limit)
  }

  /** The cap in force: the engine takes at most this many items per batch. */
  get cap(): number {
    return (this.#levels[this.#index] as Level).size
  }

  /** The hard cap (`maxBatchSize`). */
  get limit(): number {
    return this.#limit
  }

  /** Changes so far, by reason (live). */
  get changes(): Readonly<Record<CapReason, number>> {
    return this.#changes
  }

  /** The latest change, if any. */
  get last(): CapChange | undefined {
    return this.#last
  }

  /** The latency budget in force (ms): the tightest item budget of the recent batches. */
  get budgetMs(): number {
    return this.#budgets.length === 0 ? Infinity : Math.min(...this.#budgets)
  }

  /** Measured mean ms of a full batch at each level that has samples. */
  curve(): { size: number; ms: number; samples: number }[] {
    return this.#levels.filter((l) => l.n > 0).map((l) => ({ size: l.size, ms: l.ms, samples: l.n }))
  }

  /**
   * Change the limit (a new `maxBatchSize`): the levels are rebuilt and the cap is clamped to the
   * new limit (or, when the limit grows, kept). Returns the change when the cap moved.
   */
  setLimit(limit: number, now: number): CapChange | undefined {
    if (limit === this.#limit) {
      return undefined
    }
    const from = this.cap
    this.#reset(limit, from)
    return from === this.cap ? undefined : this.#record(from, 'limit', now)
  }

  /**
   * Feed one completed batch: its item count, its service time (ms), the tightest latency budget of
   * its items (`deadline − arrival`, ms; Infinity for none) and the cost model's tail ratio
   * (`U / estimate`, >= 1). Returns the change of cap it caused, if any.
   */
  observe(size: number, ms: number, budgetMs: number, ratio: number, now: number): CapChange | undefined {
    if (!(size >= 1 && ms >= 0 && ms < Infinity)) {
      return undefined
    }
    this.#batches++
    this.#budgets.push(budgetMs > 0 ? budgetMs : 0)
    if (this.#budgets.length > this.#budgetWindow) {
      this.#budgets.shift()
    }
    const level = this.#levels[this.#index] as Level
    if (size === level.size) {
      level.n++
      level.ms += (ms - level.ms) / Math.min(level.n, EWMA_SAMPLES)
    }
    return this.#decide(Math.max(1, ratio), now)
  }

  /** A plain snapshot, for metrics and logs. */
  toJSON(): { cap: number; limit: number; budgetMs: number | null; changes: Record<CapReason, number>; curve: { size: number; ms: number; samples: number }[] } {
    const b = this.budgetMs
    return { cap: this.cap, limit: this.#limit, budgetMs: Number.isFinite(b) ? b : null, changes: { ...this.#changes }, curve: this.curve() }
  }

  #decide(ratio: number, now: number): CapChange | undefined {
    const budget = this.budgetMs
    const i = this.#index
    const here = this.#levels[i] as Level
    // Budget: one level down at once when a batch at the cap would not leave room for one wait.
    if (i > 0 && 2 * this.#upper(i, ratio) > budget) {
      return this.#move(i - 1, 'budget', now)
    }
    if (here.n < this.#samples) {
      return undefined
    }
    const below = i > 0 ? (this.#levels[i - 1] as Level) : undefined
    if (below !== undefined && below.n >= this.#samples && rate(here) < rate(below) * (1 + this.#minGain)) {
      below.heldUntil = this.#batches + this.#holdFor(here.rejected)
      here.rejected++
      return this.#move(i - 1, 'throughput', now)
    }
    here.rejected = 0 // judged and kept (or nothing to judge it against)
    const next = i + 1 < this.#levels.length ? i + 1 : undefined
    if (next !== undefined && this.#batches >= here.heldUntil && 2 * this.#upper(next, ratio) <= budget) {
      return this.#move(next, 'explore', now)
    }
    return undefined
  }

  /** The hold after a level's rejection number `k` (0 = first): 4 · samples, doubling, at most `holdBatches`. */
  #holdFor(k: number): number {
    return Math.min(this.#hold, 4 * this.#samples * 2 ** Math.min(k, 30))
  }

  /** Upper estimate (ms) of a batch at level `i`: measured, or scaled from the largest measured level below. */
  #upper(i: number, ratio: number): number {
    const l = this.#levels[i] as Level
    if (l.n > 0) {
      return l.ms * ratio
    }
    for (let k = i - 1; k >= 0; k--) {
      const m = this.#levels[k] as Level
      if (m.n > 0) {
        return ((m.ms * l.size) / m.size) * ratio
      }
    }
    return 0
  }

  #move(to: number, reason: CapReason, now: number): CapChange {
    const from = this.cap
    const fromRate = rate(this.#levels[this.#index] as Level)
    this.#index = to
    const entered = this.#levels[to] as Level
    if (reason === 'explore') {
      // Judge the level on fresh batches only.
      entered.n = 0
      entered.ms = 0
    }
    return this.#record(from, reason, now, fromRate)
  }

  #record(from: number, reason: CapReason, now: number, fromRate = Number.NaN): CapChange {
    this.#changes[reason]++
    const to = this.#levels[this.#index] as Level
    this.#last = { from, to: to.size, reason, at: now, fromRate, toRate: rate(to), budgetMs: this.budgetMs }
    return this.#last
  }

  #reset(limit: number, keep?: number): void {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be an integer >= 1, got ${String(limit)}`)
    }
    const old = new Map(this.#levels.map((l) => [l.size, l]))
    this.#limit = limit
    this.#levels = capLevels(limit).map((size) => old.get(size) ?? { size, ms: 0, n: 0, heldUntil: 0, rejected: 0 })
    const want = Math.min(limit, keep ?? this.#startCap)
    // The largest level not above the wanted cap.
    let index = 0
    this.#levels.forEach((l, k) => {
      if (l.size <= want) {
        index = k
      }
    })
    this.#index = index
  }
}

/** Items per ms of a level (NaN when unmeasured). */
function rate(l: Level): number {
  return l.n > 0 && l.ms > 0 ? l.size / l.ms : l.n > 0 ? Infinity : Number.NaN
}
