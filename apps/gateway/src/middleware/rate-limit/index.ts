import type { Context, MiddlewareHandler } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { RateLimitOptions, ResolvedGatewayOptions } from '../../options.ts'
import { OPEN_PATHS } from '../auth/index.ts'
import { headerOf } from '../../request-header.ts'

/** Default bound on the number of clients tracked at once. */
export const DEFAULT_MAX_CLIENTS = 10_000

interface Bucket {
  tokens: number
  /** When `tokens` was last brought up to date, ms. */
  at: number
}

/**
 * Token buckets keyed by client, in bounded memory. Each client may make `burst` requests at once
 * and `requestsPerSecond` sustained. The map is kept in least-recently-seen order: a bucket idle
 * long enough to have refilled is the same as a new one and is dropped, and beyond `maxClients`
 * the least recently seen client is forgotten (it starts again with a full bucket).
 */
export class TokenBuckets {
  readonly rate: number
  readonly burst: number
  readonly maxClients: number
  readonly #now: () => number
  readonly #refillMs: number
  readonly #buckets = new Map<string, Bucket>()

  constructor(o: RateLimitOptions) {
    const rate = o.requestsPerSecond
    const burst = o.burst ?? Math.max(1, rate)
    const maxClients = o.maxClients ?? DEFAULT_MAX_CLIENTS
    if (!(rate > 0) || !Number.isFinite(rate)) {
      throw new RangeError(`rateLimit.requestsPerSecond must be > 0, got ${rate}`)
    }
    if (!(burst >= 1) || !Number.isFinite(burst)) {
      throw new RangeError(`rateLimit.burst must be >= 1, got ${burst}`)
    }
    if (!Number.isInteger(maxClients) || maxClients < 1) {
      throw new RangeError(`rateLimit.maxClients must be an integer >= 1, got ${maxClients}`)
    }
    this.rate = rate
    this.burst = burst
    this.maxClients = maxClients
    this.#now = o.now ?? Date.now
    this.#refillMs = (burst / rate) * 1000
  }

  /** Clients tracked now. */
  get size(): number {
    return this.#buckets.size
  }

  /** Take one token for `client`: 0 when allowed, else the seconds until one is available. */
  take(client: string): number {
    const now = this.#now()
    this.#sweep(now)
    let b = this.#buckets.get(client)
    if (b) {
      this.#buckets.delete(client) // re-inserted below: most recently seen last
      b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.at) / 1000) * this.rate)
      b.at = now
    } else {
      b = { tokens: this.burst, at: now }
      if (this.#buckets.size >= this.maxClients) {
        const oldest = this.#buckets.keys().next().value
        if (oldest !== undefined) {
          this.#buckets.delete(oldest)
        }
      }
    }
    this.#buckets.set(client, b)
    if (b.tokens >= 1) {
      b.tokens -= 1
      return 0
    }
    return (1 - b.tokens) / this.rate
  }

  /** Drop the buckets that have refilled (they are oldest first). */
  #sweep(now: number): void {
    for (const [k, b] of this.#buckets) {
      if (now - b.at < this.#refillMs) {
        return
      }
      this.#buckets.delete(k)
    }
  }
}

/** The rate-limit key of a request: its credential, else `x-forwarded-for`, else the peer address. */
export function clientKey(c: Context, o: ResolvedGatewayOptions): string {
  const who = c.get('cohortClient')
  if (who) {
    return who
  }
  const fwd = headerOf(c, 'x-forwarded-for')?.split(',')[0]?.trim()
  if (fwd) {
    return `ip:${fwd}`
  }
  return `ip:${o.adapter?.clientAddress?.(c) ?? 'unknown'}`
}

/**
 * Per-client rate limit (token bucket); `undefined` (no middleware) when `rateLimit` is not set.
 * Runs after authentication, so clients are told apart by API key or token subject; without
 * credentials by `x-forwarded-for` (set by a trusted proxy) or the peer address. Beyond the limit:
 * 429 `RATE_LIMITED` with `Retry-After` (seconds, rounded up). Health probes are not limited.
 */
export function rateLimitMiddleware(o: ResolvedGatewayOptions): MiddlewareHandler | undefined {
  if (!o.rateLimit) {
    return undefined
  }
  const buckets = new TokenBuckets(o.rateLimit)
  return async (c, next) => {
    if (OPEN_PATHS.has(c.req.path)) {
      return next()
    }
    const wait = buckets.take(clientKey(c, o))
    if (wait > 0) {
      throw new CohortError('RATE_LIMITED', `rate limit of ${buckets.rate} requests/s (burst ${buckets.burst}) exceeded`, {
        retryAfterS: wait,
      })
    }
    return next()
  }
}
