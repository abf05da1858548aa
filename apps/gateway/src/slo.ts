/**
 * The server-side SLOs the workers announce (`ModelMeta.slo`), cached per model for the door:
 * the deadline of a request whose client sends none (docs/batching.md#server-side-slo); and, with
 * another `pick`, a generative model's budgets (`ModelMeta.generative.slo`,
 * docs/generative.md#deadlines-and-the-server-slo).
 * @module
 */
import type { ModelMeta } from '@cohort/protocol'

/** How long (ms) an announced SLO is used before it is asked for again. */
export const SLO_TTL_MS = 2000
/** Most models remembered (only models a worker answered for are kept: bounded memory). */
export const SLO_MAX_MODELS = 1024

interface Entry<T> {
  ms: T | undefined
  at: number
  pending?: Promise<T | undefined> | undefined
}

/** The predict SLO of a model's metadata (ms), if it announces one. */
export function predictSlo(m: Pick<ModelMeta, 'slo'>): number | undefined {
  return typeof m.slo?.ms === 'number' && m.slo.ms > 0 ? m.slo.ms : undefined
}

/** Per-model SLOs from model metadata (what `pick` takes of it), refreshed at most every `ttlMs`. */
export class ModelSlos<T = number, M = Pick<ModelMeta, 'slo'>> {
  readonly #entries = new Map<string, Entry<T>>()

  constructor(
    readonly meta: (model: string) => Promise<M>,
    readonly ttlMs = SLO_TTL_MS,
    readonly now: () => number = Date.now,
    readonly pick: (m: M) => T | undefined = predictSlo as unknown as (m: M) => T | undefined,
  ) {}

  /** Whether a worker answered for `model` (its SLO, or that it announces none) since this cache began: {@link peek} has an answer. */
  has(model: string): boolean {
    return this.#entries.has(model)
  }

  /** The cached SLO of `model` (ms), stale or not; `undefined` when none was announced yet. A stale entry is refreshed in the background. */
  peek(model: string): T | undefined {
    const e = this.#entries.get(model)
    if (e !== undefined && this.now() - e.at >= this.ttlMs) {
      void this.get(model)
    }
    return e?.ms
  }

  /**
   * The SLO of `model` (ms): the cached one while fresh, else what a worker announces now
   * (`undefined` when none answers or the worker announces none; the caller keeps its default).
   * Never throws.
   */
  get(model: string): Promise<T | undefined> {
    const e = this.#entries.get(model)
    if (e !== undefined && (e.pending || this.now() - e.at < this.ttlMs)) {
      return e.pending ?? Promise.resolve(e.ms)
    }
    const pending = this.meta(model).then(
      (m) => {
        const ms = m === undefined || m === null ? undefined : this.pick(m)
        this.#remember(model, ms)
        return ms
      },
      () => {
        if (e !== undefined) {
          e.pending = undefined
        }
        return e?.ms
      },
    )
    if (e !== undefined) {
      e.pending = pending
    }
    return pending
  }

  #remember(model: string, ms: T | undefined): void {
    this.#entries.delete(model)
    if (this.#entries.size >= SLO_MAX_MODELS) {
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) {
        this.#entries.delete(oldest)
      }
    }
    this.#entries.set(model, { ms, at: this.now() })
  }
}
