/**
 * Webhook delivery for predictions: POST the prediction as JSON, retried with exponential backoff.
 * Runtime-agnostic: the HTTP client (`fetch`) is injected. Delivery never blocks the caller.
 * @module
 */
import { wantsEvent, type Prediction, type WebhookEvent } from './predictions.ts'

/** Options of {@link WebhookSender}. */
export interface WebhookOptions {
  /** Attempts per event, the first included. @default 6 */
  maxAttempts?: number
  /** Wait before the first retry, ms; doubled after each failure. @default 500 */
  initialDelayMs?: number
  /** Longest wait between attempts, ms. @default 30000 */
  maxDelayMs?: number
  /** Per-attempt timeout, ms. @default 10000 */
  timeoutMs?: number
  /** The HTTP client. @default globalThis.fetch */
  fetch?: typeof fetch
  /** Called once per event that could not be delivered after every attempt. */
  onGiveUp?: (p: Prediction, event: WebhookEvent, lastError: string) => void
}

/** Delay before retry `n` (1-based): initial * 2^(n-1), capped. */
export function backoffMs(n: number, initialDelayMs: number, maxDelayMs: number): number {
  return Math.min(maxDelayMs, initialDelayMs * 2 ** Math.max(0, n - 1))
}

/** Default attempts per webhook event, the first included. */
export const DEFAULT_WEBHOOK_ATTEMPTS = 6
/** Default wait before a webhook's first retry (doubled after each failure). */
export const DEFAULT_WEBHOOK_INITIAL_DELAY_MS = 500
/** Default longest wait between webhook attempts. */
export const DEFAULT_WEBHOOK_MAX_DELAY_MS = 30_000
/** Default per-attempt timeout of a webhook. */
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 10_000

/**
 * Sends webhook events. Events of one prediction go out in order (start before completed); a
 * failing receiver delays only its own prediction's events. `close()` stops retries.
 */
export class WebhookSender {
  readonly #o: Required<Omit<WebhookOptions, 'onGiveUp' | 'fetch'>> & Pick<WebhookOptions, 'onGiveUp'>
  readonly #fetch: typeof fetch
  readonly #chains = new Map<string, Promise<void>>()
  #closed = false
  readonly #timers = new Set<ReturnType<typeof setTimeout>>()
  readonly #wakers = new Set<() => void>()

  constructor(o: WebhookOptions = {}) {
    this.#o = {
      maxAttempts: o.maxAttempts ?? DEFAULT_WEBHOOK_ATTEMPTS,
      initialDelayMs: o.initialDelayMs ?? DEFAULT_WEBHOOK_INITIAL_DELAY_MS,
      maxDelayMs: o.maxDelayMs ?? DEFAULT_WEBHOOK_MAX_DELAY_MS,
      timeoutMs: o.timeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS,
      onGiveUp: o.onGiveUp,
    }
    this.#fetch = o.fetch ?? ((...a) => globalThis.fetch(...a))
  }

  /** Queue `event` for the prediction's webhook when its filter wants it (returns at once). */
  send(p: Prediction, event: WebhookEvent): void {
    const url = p.webhook
    if (this.#closed || url === undefined || !wantsEvent(p, event)) {
      return
    }
    const body = JSON.stringify(p)
    const prev = this.#chains.get(p.id) ?? Promise.resolve()
    const next = prev.then(() => this.#deliver(p, url, event, body))
    this.#chains.set(p.id, next)
    void next.then(() => {
      if (this.#chains.get(p.id) === next) {
        this.#chains.delete(p.id)
      }
    })
  }

  /** Resolves when every queued event was delivered or given up (tests, drain). */
  async idle(): Promise<void> {
    while (this.#chains.size > 0) {
      await Promise.all([...this.#chains.values()])
    }
  }

  /** Stop: pending retries are dropped. Idempotent. */
  close(): void {
    this.#closed = true
    for (const t of this.#timers) {
      clearTimeout(t)
    }
    this.#timers.clear()
    for (const w of this.#wakers) {
      w()
    }
  }

  /** `#closed` read through a call: close() may run while a delivery sleeps (TypeScript keeps a field's narrowing across the await). */
  #isClosed(): boolean {
    return this.#closed
  }

  /** POST `body` to `url`, retrying with backoff; `onGiveUp` once every attempt failed. */
  async #deliver(p: Prediction, url: string, event: WebhookEvent, body: string): Promise<void> {
    let last = ''
    for (let attempt = 1; attempt <= this.#o.maxAttempts && !this.#closed; attempt++) {
      if (attempt > 1) {
        await this.#sleep(backoffMs(attempt - 1, this.#o.initialDelayMs, this.#o.maxDelayMs))
        if (this.#isClosed()) {
          break
        }
      }
      try {
        const res = await this.#fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-cohort-webhook-event': event },
          body,
          signal: AbortSignal.timeout(this.#o.timeoutMs),
        })
        // Done at the status line: an HTTP/1.0 receiver without Content-Length ends its body only
        // by closing, which the next event must not wait for.
        void res.body?.cancel().catch(() => undefined)
        if (res.ok) {
          return
        }
        last = `HTTP ${res.status}`
        // A 4xx other than 408/429 will not get better by retrying.
        if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
          break
        }
      } catch (e) {
        last = e instanceof Error ? e.message : String(e)
      }
    }
    this.#o.onGiveUp?.(p, event, last)
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t)
        this.#timers.delete(t)
        this.#wakers.delete(done)
        resolve()
      }
      const t = setTimeout(done, ms)
      ;(t as { unref?: () => void }).unref?.()
      this.#timers.add(t)
      this.#wakers.add(done)
    })
  }
}
