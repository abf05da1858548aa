import type { DurationStat, InferReply, InferenceStatsData, ItemTiming } from '@cohort/protocol'

const zero = (): DurationStat => ({ count: 0, ns: 0 })
const ns = (ms: number): number => Math.round(ms * 1e6)

/**
 * Triton-style inference statistics of one model on one worker (`$SRV.STATS` endpoint data,
 * summed over workers by the gateway's `GET /v2/models/{m}/stats`). Counts what really ran:
 * batches when they finish, requests when their reply is sent.
 */
export class InferStats {
  readonly #success = zero()
  readonly #fail = zero()
  readonly #queue = zero()
  readonly #computeInfer = zero()
  readonly #batches = new Map<number, DurationStat>()
  #inferences = 0
  #executions = 0
  #last = 0

  /** A batch of `size` items ran for `computeMs`. */
  batch(size: number, computeMs: number): void {
    this.#executions++
    const b = this.#batches.get(size) ?? zero()
    b.count++
    b.ns += ns(computeMs)
    this.#batches.set(size, b)
  }

  /**
   * A reply was sent `totalMs` after receipt. A request succeeds when neither it nor any item
   * failed; a successful request adds its items to `inference_count`, and the longest queue wait
   * and batch compute time of its items to `queue` and `compute_infer`.
   */
  request(reply: InferReply, totalMs: number, timing: readonly ItemTiming[] | undefined): void {
    this.#last = Date.now()
    const failed = reply.error !== undefined || (reply.errors?.some((e) => e !== null) ?? false)
    if (failed) {
      this.#fail.count++
      this.#fail.ns += ns(totalMs)
      return
    }
    this.#success.count++
    this.#success.ns += ns(totalMs)
    const items = timing ?? []
    this.#inferences += items.length
    this.#queue.count++
    this.#queue.ns += ns(Math.max(0, ...items.map((t) => t.queueMs)))
    this.#computeInfer.count++
    this.#computeInfer.ns += ns(Math.max(0, ...items.map((t) => t.computeMs)))
  }

  snapshot(): InferenceStatsData {
    const copy = (d: DurationStat): DurationStat => ({ count: d.count, ns: d.ns })
    return {
      success: copy(this.#success),
      fail: copy(this.#fail),
      queue: copy(this.#queue),
      compute_input: { count: this.#success.count, ns: 0 },
      compute_infer: copy(this.#computeInfer),
      compute_output: { count: this.#success.count, ns: 0 },
      inference_count: this.#inferences,
      execution_count: this.#executions,
      last_inference: this.#last,
      batch_stats: [...this.#batches.entries()].sort((a, b) => a[0] - b[0]).map(([batch_size, d]) => ({ batch_size, compute_infer: copy(d) })),
    }
  }
}
