/**
 * What routes need of the workers' metadata on a request's path (the default model, a chat
 * template, a schema, an SLO), held by the gateway and refreshed behind the requests: a fresh
 * entry is answered at once, a stale one too while one refresh runs in the background; only a
 * model never seen (or whose last refresh failed) waits for a worker's answer. Pure: the fetch and
 * the clock are injected (docs/architecture.md#per-request-budgets).
 * @module
 */

/** How long (ms) an answer is fresh; past it, it is still answered while it is asked for again. */
export const META_TTL_MS = 2000
/** Most keys remembered (least recently refreshed forgotten first: bounded memory). */
export const META_MAX_KEYS = 1024

interface Entry<T> {
  value: T
  at: number
  refreshing: boolean
}

/** Values by key (a model, a model and version), fetched once and refreshed while they are served. */
export class ServeWhileRefresh<T> {
  readonly #entries = new Map<string, Entry<T>>()
  readonly #pending = new Map<string, Promise<T>>()

  constructor(
    readonly fetch: (key: string) => Promise<T>,
    readonly ttlMs = META_TTL_MS,
    readonly now: () => number = Date.now,
    /** Whether an answer is worth keeping (an empty discovery is not: it is asked for again). */
    readonly keep: (v: T) => boolean = () => true,
  ) {}

  /**
   * The value of `key`: the held one (a stale one starts a background refresh), else the fetch's
   * answer (concurrent callers share one fetch). A fetch's failure is thrown to the callers that
   * waited for it and forgets the held value.
   */
  get(key: string): Promise<T> {
    const e = this.#entries.get(key)
    if (e !== undefined) {
      if (!e.refreshing && this.now() - e.at >= this.ttlMs) {
        e.refreshing = true
        this.#fetch(key).catch(() => undefined)
      }
      return Promise.resolve(e.value)
    }
    return this.#pending.get(key) ?? this.#fetch(key)
  }

  /** The held value of `key`, fresh or stale, without fetching (undefined when none is held). */
  peek(key: string): T | undefined {
    return this.#entries.get(key)?.value
  }

  /** Forget `key` (the next {@link get} waits for a fresh answer). */
  forget(key: string): void {
    this.#entries.delete(key)
  }

  #fetch(key: string): Promise<T> {
    const p = this.fetch(key).then(
      (v) => {
        this.#pending.delete(key)
        this.#entries.delete(key)
        if (this.keep(v)) {
          if (this.#entries.size >= META_MAX_KEYS) {
            const oldest = this.#entries.keys().next().value
            if (oldest !== undefined) {
              this.#entries.delete(oldest)
            }
          }
          this.#entries.set(key, { value: v, at: this.now(), refreshing: false })
        }
        return v
      },
      (e: unknown) => {
        this.#pending.delete(key)
        this.#entries.delete(key)
        throw e
      },
    )
    this.#pending.set(key, p)
    return p
  }
}
