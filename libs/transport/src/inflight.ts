/**
 * A bound on the requests and bytes a process holds at once (bodies being read, messages queued or
 * running), shared by the gateway and the worker: past it, new work is refused at once (503
 * `OVERLOADED` with `Retry-After`) instead of growing memory without limit.
 * @module
 */

/** Bounds of an {@link InflightBudget}. */
export interface InflightLimits {
  /** Most requests held at once. An integer >= 1. @default 1024 */
  maxRequests?: number
  /**
   * Most request bytes held at once (declared or read so far). An integer >= 1. The default keeps
   * a 2 GiB process safe with JSON bodies, which take several times their size once parsed.
   * @default 268435456 (256 MiB)
   */
  maxBytes?: number
}

/** Default most requests in flight (1024). */
export const DEFAULT_MAX_INFLIGHT_REQUESTS = 1024
/** Default most bytes in flight (256 MiB). */
export const DEFAULT_MAX_INFLIGHT_BYTES = 256 * 1024 * 1024

/** Counts requests and bytes in flight against two bounds. Pure: no timers, no I/O. */
export class InflightBudget {
  readonly maxRequests: number
  readonly maxBytes: number
  #requests = 0
  #bytes = 0
  #refused = 0

  constructor(o: InflightLimits = {}) {
    this.maxRequests = o.maxRequests ?? DEFAULT_MAX_INFLIGHT_REQUESTS
    this.maxBytes = o.maxBytes ?? DEFAULT_MAX_INFLIGHT_BYTES
    for (const [k, v] of [
      ['maxRequests', this.maxRequests],
      ['maxBytes', this.maxBytes],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < 1) {
        throw new RangeError(`${k} must be an integer >= 1, got ${String(v)}`)
      }
    }
  }

  /** Requests held now. */
  get requests(): number {
    return this.#requests
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes
  }

  /** Requests or byte reservations refused so far. */
  get refused(): number {
    return this.#refused
  }

  /** Take one request and `bytes`; false (nothing taken) when either bound would be passed. */
  tryAdmit(bytes: number): boolean {
    if (this.#requests + 1 > this.maxRequests || this.#bytes + bytes > this.maxBytes) {
      this.#refused++
      return false
    }
    this.#requests++
    this.#bytes += bytes
    return true
  }

  /** Take `bytes` more for a request already admitted (a body read in chunks); false when past the bound. */
  tryTakeBytes(bytes: number): boolean {
    if (this.#bytes + bytes > this.maxBytes) {
      this.#refused++
      return false
    }
    this.#bytes += bytes
    return true
  }

  /** Give back one request and its `bytes`. */
  release(bytes: number): void {
    this.#requests = Math.max(0, this.#requests - 1)
    this.#bytes = Math.max(0, this.#bytes - bytes)
  }

  /** A line for 503 messages: what is held and the bounds. */
  describe(): string {
    return `${this.#requests} requests and ${this.#bytes} bytes in flight (bounds ${this.maxRequests} requests, ${this.maxBytes} bytes)`
  }
}
