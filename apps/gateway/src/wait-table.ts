/**
 * The gateway's per-model admission state: each worker's latest estimate of the queue wait of a
 * new item (`WaitEstimate`, from its v2 accept notices and its heartbeats), plus the work this
 * gateway admitted since that estimate came, for the door's worker-wait check (wait-check.ts;
 * docs/batching.md#admission-at-the-door). Pure: an injected clock.
 * @module
 */
import type { WaitEstimate } from '@cohort/protocol'

/** Most models remembered (older ones are forgotten first: bounded memory). */
export const WAIT_MAX_MODELS = 1024
/** Most tenant waits remembered per worker and model (the wire sends at most 16 per message). */
export const WAIT_MAX_TENANTS = 64
/** Heartbeat interval assumed for a worker whose heartbeat was not seen yet (the workers' default), ms. */
const ASSUMED_INTERVAL_MS = 1000

/**
 * A wait as a fluid queue: `waitMs` of work ahead at clock `at`, draining at one ms per ms (the
 * worker keeps working); admitted work is added on top.
 */
interface Wait {
  waitMs: number
  at: number
}

/** A {@link Wait} at `now`. */
const waitAt = (w: Wait, now: number) => Math.max(0, w.waitMs - (now - w.at))

interface Entry {
  /** When the estimate arrived (clock ms). */
  at: number
  /** Undefined: the worker serves the model but does not judge arrivals (it admits everything). */
  waitMs: number | undefined
  serviceMs: number
  /** Ms each more queued item adds (0: the worker did not say; nothing is added). */
  itemMs: number
  /** Ms a new item would run alone, the learned t(1) (0: the worker did not say). */
  aloneMs: number
  /** Per tenant: its wait, from the estimate or grown by what this gateway admitted since. */
  tenants: Map<string, Wait>
}

/** What {@link WorkerWaits.best} answers: the worker that would finish a new item first. */
export interface BestWait {
  /** Its wait before the item's batch starts, ms from now (the estimate less the time since it came). */
  waitMs: number
  /** That batch's run, ms. */
  serviceMs: number
  /** Workers with a fresh estimate for the model. */
  workers: number
  /**
   * The least time any of them needs to run a new item alone, ms; undefined when one did not say
   * (an older worker): a deadline shorter can never be met.
   */
  aloneMs: number | undefined
}

/** Per model and worker, the last queue-wait estimate heard, aged by the time since it came. */
export class WorkerWaits {
  readonly #models = new Map<string, Map<string, Entry>>()
  /** Each worker's heartbeat interval (ms), from its heartbeats. */
  readonly #intervals = new Map<string, number>()

  constructor(readonly now: () => number = Date.now) {}

  /**
   * A worker's heartbeat: its estimates replace what was known of it; a model it no longer lists
   * (its engine stopped judging, or it stopped serving it) is forgotten for that worker.
   */
  heartbeat(worker: string, intervalMs: number, models: Record<string, WaitEstimate> | undefined): void {
    this.#intervals.set(worker, intervalMs)
    const now = this.now()
    for (const [model, byWorker] of this.#models) {
      if (models?.[model] === undefined && byWorker.delete(worker) && byWorker.size === 0) {
        this.#models.delete(model)
      }
    }
    for (const [model, w] of Object.entries(models ?? {})) {
      this.#set(model, worker, { at: now, waitMs: w.waitMs, serviceMs: w.serviceMs, itemMs: w.itemMs ?? 0, aloneMs: w.aloneMs ?? 0, tenants: tenantMap(w.tenants, now) })
    }
  }

  /**
   * A v2 accept notice of `worker` for a pack of `model`: its fresh estimate (tenant waits are
   * merged: the notice names only the pack's tenants). Without `waitMs` the worker does not judge
   * arrivals: it counts as one that admits.
   */
  accepted(
    model: string,
    worker: string,
    n: { waitMs?: number | undefined; serviceMs?: number | undefined; itemMs?: number | undefined; aloneMs?: number | undefined; tenants?: Record<string, number> | undefined },
  ): void {
    const now = this.now()
    const old = this.#models.get(model)?.get(worker)
    const tenants = old?.tenants ?? new Map<string, Wait>()
    for (const [t, ms] of Object.entries(n.tenants ?? {})) {
      tenants.delete(t)
      tenants.set(t, { waitMs: ms, at: now })
    }
    while (tenants.size > WAIT_MAX_TENANTS) {
      tenants.delete(tenants.keys().next().value as string)
    }
    this.#set(model, worker, { at: now, waitMs: n.waitMs, serviceMs: n.serviceMs ?? 0, itemMs: n.itemMs ?? 0, aloneMs: n.aloneMs ?? 0, tenants })
  }

  /**
   * The door admitted `items` of `tenant` for `model` (it fits by the estimates): add them to the
   * waits until the next estimate replaces them. NATS's queue group picks the worker, so the
   * gateway does not know which one a request reaches until its accept notice: each worker with
   * an estimate is charged an equal share, `items / workers`, times its `itemMs`. Under fair
   * shares a tenant's new item waits behind its own queued items, not behind other tenants'
   * newer ones, so only `tenant`'s wait grows (the anonymous tenant's, with auth off: every
   * request). A worker that sent no `itemMs` is charged nothing.
   */
  admitted(model: string, tenant: string, items: number): void {
    const byWorker = this.#models.get(model)
    if (byWorker === undefined || byWorker.size === 0 || !(items > 0)) {
      return
    }
    const now = this.now()
    const share = items / byWorker.size
    for (const e of byWorker.values()) {
      if (e.waitMs === undefined || !(e.itemMs > 0)) {
        continue
      }
      const t = e.tenants.get(tenant)
      const from = t ?? { waitMs: e.waitMs, at: e.at }
      e.tenants.delete(tenant)
      e.tenants.set(tenant, { waitMs: waitAt(from, now) + share * e.itemMs, at: now })
      while (e.tenants.size > WAIT_MAX_TENANTS) {
        e.tenants.delete(e.tenants.keys().next().value as string)
      }
    }
  }

  /** A worker left (drained: `bye`): forget its estimates. */
  forget(worker: string): void {
    this.#intervals.delete(worker)
    for (const [model, byWorker] of this.#models) {
      if (byWorker.delete(worker) && byWorker.size === 0) {
        this.#models.delete(model)
      }
    }
  }

  /**
   * The worker that would finish a new item of `tenant` ('' : anonymous) for `model` first,
   * among estimates younger than `staleHeartbeats` of their worker's heartbeat intervals (older
   * ones are dropped: never a permanent lockout). `undefined` when no fresh estimate exists, or a
   * fresh worker does not judge arrivals: nothing is known that could refuse.
   */
  best(model: string, tenant: string, staleHeartbeats: number): BestWait | undefined {
    const byWorker = this.#models.get(model)
    if (byWorker === undefined) {
      return undefined
    }
    const now = this.now()
    let best: BestWait | undefined
    let workers = 0
    let unjudged = false
    let alone = Infinity
    for (const [worker, e] of byWorker) {
      const age = now - e.at
      if (age > staleHeartbeats * (this.#intervals.get(worker) ?? ASSUMED_INTERVAL_MS)) {
        byWorker.delete(worker)
        continue
      }
      workers++
      if (e.waitMs === undefined) {
        unjudged = true
        continue
      }
      alone = Math.min(alone, e.aloneMs > 0 ? e.aloneMs : 0)
      const t = e.tenants.get(tenant)
      const waitMs = t !== undefined ? waitAt(t, now) : Math.max(0, e.waitMs - age)
      if (best === undefined || waitMs + e.serviceMs < best.waitMs + best.serviceMs) {
        best = { waitMs, serviceMs: e.serviceMs, workers: 0, aloneMs: undefined }
      }
    }
    if (byWorker.size === 0) {
      this.#models.delete(model)
    }
    return best === undefined || unjudged ? undefined : { ...best, workers, aloneMs: alone > 0 && Number.isFinite(alone) ? alone : undefined }
  }

  #set(model: string, worker: string, e: Entry): void {
    let byWorker = this.#models.get(model)
    if (byWorker === undefined) {
      if (this.#models.size >= WAIT_MAX_MODELS) {
        this.#models.delete(this.#models.keys().next().value as string)
      }
      byWorker = new Map()
      this.#models.set(model, byWorker)
    }
    byWorker.set(worker, e)
  }
}

function tenantMap(t: Record<string, number> | undefined, at: number): Map<string, Wait> {
  return new Map(Object.entries(t ?? {}).map(([k, waitMs]) => [k, { waitMs, at }]))
}
