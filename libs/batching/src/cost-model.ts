/**
 * An online model of batch service time, t(b) = a + c·b, learned from measured batches.
 * @module
 */

/** Options of `new CostModel()`. */
export interface CostModelOptions {
  /**
   * Weight kept by past batches at each new observation, in (0, 1]. 0.98 gives a half-life of
   * about 34 batches (an effective window of about 50, like BentoML's last 50 batches).
   * @default 0.98
   */
  decay?: number
  /**
   * Recent batches whose measured/estimated ratio feeds `upper` (an integer >= 1).
   * @default 32
   */
  window?: number
  /**
   * Quantile of those ratios used by `upper`, in (0, 1] (nearest rank; with 32 batches, 0.95
   * ignores the single worst one).
   * @default 0.95
   */
  quantile?: number
}

/**
 * The size spread below which the least-squares slope is not trusted: the weighted variance of
 * the sizes must exceed `MIN_SPREAD · mean²` (a coefficient of variation of 5 %).
 */
const MIN_SPREAD = 0.0025

/**
 * Learns the service time of a batch as an affine function of its size (item count or summed
 * cost units): `t(b) = a + c·b` in ms, with `a, c >= 0`.
 *
 * - **Estimator**: exponentially weighted least squares over every observed batch (each new batch
 *   has weight 1, older ones `decay^age`).
 * - **One size only**: while the weighted sizes barely vary (coefficient of variation under 5 %,
 *   for example only batches of 1 at low load, or only full batches under load), the slope is not
 *   identifiable. Then `a` keeps the value of the last well-conditioned fit (0 if there was none,
 *   and never more than the mean time) and `c = (mean t − a) / mean b`: with no history this is
 *   the proportional model `c = t/b, a = 0`.
 * - **Clamping**: a negative slope becomes `c = 0, a = mean t`; a negative intercept becomes
 *   `a = 0` with the least-squares slope through the origin.
 * - **Upper bound**: `upper(b) = estimate(b) · r`, where `r >= 1` is the `quantile` of
 *   measured/estimated over the last `window` batches, recomputed against the current fit after
 *   every observation (Clockwork uses the p99 of its last 10 runs).
 *
 * With no observation yet, `estimate` and `upper` return 0; check `samples` first.
 */
export class CostModel {
  readonly #decay: number
  readonly #window: number
  readonly #quantile: number
  #s0 = 0
  #sx = 0
  #sy = 0
  #sxx = 0
  #sxy = 0
  #a = 0
  #c = 0
  #anchor: number | undefined
  #samples = 0
  #recent: [size: number, ms: number][] = []
  #ratio = 1
  /** The window changed since `#ratio` was computed (it is computed when read, not per batch). */
  #ratioStale = false

  /** @throws RangeError on an option outside its documented range. */
  constructor(opts: CostModelOptions = {}) {
    const { decay = 0.98, window = 32, quantile = 0.95 } = opts
    if (!(decay > 0 && decay <= 1)) {
      throw new RangeError(`decay must be in (0, 1], got ${String(decay)}`)
    }
    if (!Number.isInteger(window) || window < 1) {
      throw new RangeError(`window must be an integer >= 1, got ${String(window)}`)
    }
    if (!(quantile > 0 && quantile <= 1)) {
      throw new RangeError(`quantile must be in (0, 1], got ${String(quantile)}`)
    }
    this.#decay = decay
    this.#window = window
    this.#quantile = quantile
  }

  /** Fixed cost per batch (ms). */
  get a(): number {
    return this.#a
  }

  /** Cost per size unit (ms per item or per cost unit). */
  get c(): number {
    return this.#c
  }

  /** Batches observed (ignored observations do not count). */
  get samples(): number {
    return this.#samples
  }

  /** The factor `upper(b) / estimate(b)` (>= 1). */
  get ratio(): number {
    return this.#currentRatio()
  }

  /**
   * Record one executed batch: its size (> 0, finite) and its service time in ms (>= 0, finite).
   * Anything else is ignored.
   */
  observe(size: number, ms: number): void {
    if (!(size > 0 && size < Infinity && ms >= 0 && ms < Infinity)) {
      return
    }
    const d = this.#decay
    this.#s0 = this.#s0 * d + 1
    this.#sx = this.#sx * d + size
    this.#sy = this.#sy * d + ms
    this.#sxx = this.#sxx * d + size * size
    this.#sxy = this.#sxy * d + size * ms
    this.#samples++
    this.#fit()
    this.#recent.push([size, ms])
    if (this.#recent.length > this.#window) {
      this.#recent.shift()
    }
    this.#ratioStale = true
  }

  /** Expected service time (ms) of a batch of `size`. 0 before the first observation. */
  estimate(size: number): number {
    return this.#a + this.#c * size
  }

  /** A high estimate (ms) of the service time of a batch of `size`, for deadline checks. */
  upper(size: number): number {
    return this.estimate(size) * this.#currentRatio()
  }

  /** A plain snapshot, for metrics and logs. */
  toJSON(): { a: number; c: number; samples: number; ratio: number } {
    return { a: this.#a, c: this.#c, samples: this.#samples, ratio: this.#currentRatio() }
  }

  #fit(): void {
    const s0 = this.#s0
    const meanX = this.#sx / s0
    const meanY = this.#sy / s0
    const varX = this.#sxx / s0 - meanX * meanX
    if (varX > MIN_SPREAD * meanX * meanX) {
      let c = (this.#sxy / s0 - meanX * meanY) / varX
      let a = meanY - c * meanX
      if (c < 0) {
        c = 0
        a = meanY
      } else if (a < 0) {
        a = 0
        c = this.#sxy / this.#sxx
      }
      this.#a = a
      this.#c = c
      this.#anchor = a
    } else {
      const a = Math.min(this.#anchor ?? 0, meanY)
      this.#a = a
      this.#c = Math.max(0, (meanY - a) / meanX)
    }
  }

  #currentRatio(): number {
    if (this.#ratioStale) {
      this.#ratioStale = false
      this.#updateRatio()
    }
    return this.#ratio
  }

  #updateRatio(): void {
    const ratios: number[] = []
    for (const [size, ms] of this.#recent) {
      const est = this.estimate(size)
      if (est > 0) {
        ratios.push(ms / est)
      }
    }
    if (ratios.length === 0) {
      this.#ratio = 1
      return
    }
    ratios.sort((x, y) => x - y)
    const rank = Math.min(ratios.length, Math.max(1, Math.ceil(this.#quantile * ratios.length)))
    this.#ratio = Math.max(1, ratios[rank - 1] as number)
  }
}
