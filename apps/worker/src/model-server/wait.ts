import type { BatchEngine } from '@cohort/batching'
import { MAX_WAIT_TENANTS, type WaitEstimate } from '@cohort/protocol'

/** Ms rounded to 0.1 (fewer msgpack bytes; the estimate is not that exact). */
const ms = (x: number) => Math.round(x * 10) / 10
/** Ms rounded to 0.001 (a per-item cost is often below 0.1 ms). */
const fine = (x: number) => Math.round(x * 1000) / 1000

/**
 * The engine's queue-wait estimate as the wire carries it (accept notices and heartbeats;
 * docs/batching.md#admission-at-the-door), for `tenants` (at most {@link MAX_WAIT_TENANTS} of
 * them). `undefined` when the engine does not judge arrivals: the
 * gateway then admits.
 */
export function wireWait(engine: Pick<BatchEngine<unknown>, 'waitEstimate'>, tenants: Iterable<string>): WaitEstimate | undefined {
  const asked: string[] = []
  for (const t of tenants) {
    if (asked.length >= MAX_WAIT_TENANTS) {
      break
    }
    if (!asked.includes(t)) {
      asked.push(t)
    }
  }
  const w = engine.waitEstimate(asked)
  if (w === undefined || !Number.isFinite(w.waitMs)) {
    return undefined
  }
  const out: WaitEstimate = { queued: w.queued, waitMs: ms(w.waitMs), serviceMs: ms(w.serviceMs) }
  if (Number.isFinite(w.itemMs)) {
    out.itemMs = fine(w.itemMs)
  }
  if (Number.isFinite(w.aloneMs) && w.aloneMs > 0) {
    out.aloneMs = fine(w.aloneMs)
  }
  if (w.tenants.size > 0) {
    out.tenants = Object.fromEntries([...w.tenants].map(([t, v]) => [t, ms(v)]))
  }
  return out
}

/** {@link wireWait} for a heartbeat: the tenants with the most items queued. */
export function heartbeatWait(engine: Pick<BatchEngine<unknown>, 'waitEstimate' | 'queuedByTenant'>): WaitEstimate | undefined {
  const top = [...engine.queuedByTenant()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, MAX_WAIT_TENANTS)
    .map(([t]) => t)
  return wireWait(engine, top)
}
