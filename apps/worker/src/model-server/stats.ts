import type { CapChange } from '@cohort/batching'
import { frozenLabels, type Labels, type WorkerMetrics } from '@cohort/metrics'
import type { Logger } from '@cohort/observability'
import type { InferReply, ItemTiming } from '@cohort/protocol'
import { InferStats } from '../infer-stats.ts'

/**
 * Request counters of the NATS services protocol (`$SRV.STATS`, see services.ts): inference
 * requests received on the main and overflow subjects, those answered with an error (request-level
 * or any failed item), those answered, the latest error and the summed receipt-to-reply time in ns.
 */
export interface RequestStats {
  requests: number
  answered: number
  errors: number
  lastError: string
  processingNs: number
}

/**
 * The stats systems of one model server: the services protocol's {@link RequestStats}, the
 * Triton-style {@link InferStats}, and the worker's Prometheus metrics under the model's label.
 */
export class ServerStats {
  readonly requests: RequestStats = { requests: 0, answered: 0, errors: 0, lastError: '', processingNs: 0 }
  /** Triton-style inference statistics (`$SRV.STATS` data, the gateway's `/v2/models/{m}/stats`). */
  readonly infer = new InferStats()
  readonly #mx: WorkerMetrics
  /** Label sets, frozen and made once per value: a per-request count builds no object and no series key. */
  readonly #labels: Readonly<{ model: string }>
  readonly #code: (code: string) => Labels
  readonly #reason: (reason: string) => Labels
  readonly #tenant: (tenant: string) => Labels
  readonly #tenantCode = new Map<string, (code: string) => Labels>()

  readonly #tenants = new TenantLabels()

  constructor(metrics: WorkerMetrics, model: string) {
    this.#mx = metrics
    this.#labels = Object.freeze({ model })
    this.#code = frozenLabels(this.#labels, 'code')
    this.#reason = frozenLabels(this.#labels, 'reason')
    this.#tenant = frozenLabels(this.#labels, 'tenant')
  }

  /** The frozen labels {model, tenant, code} (tenant bounded by TenantLabels, codes by the error registry). */
  #tenantCodeLabels(tenant: string, code: string): Labels {
    let of = this.#tenantCode.get(tenant)
    if (of === undefined) {
      of = frozenLabels(this.#tenant(tenant), 'code')
      this.#tenantCode.set(tenant, of)
    }
    return of(code)
  }

  /** Count `n` inference requests received. */
  received(n = 1): void {
    this.requests.requests += n
  }

  /** Count a reply sent (`t0`: performance.now() at receipt, absent for a reply to no request). */
  replied(reply: InferReply, t0: number | undefined, timing: ItemTiming[] | undefined): void {
    const st = this.requests
    if (t0 !== undefined) {
      st.answered++
      st.processingNs += Math.round((performance.now() - t0) * 1e6)
    }
    const err = reply.error ?? reply.errors?.find((e) => e)
    if (err) {
      st.errors++
      st.lastError = `${err.code}: ${err.message}`
    }
    this.infer.request(reply, t0 === undefined ? 0 : performance.now() - t0, timing)
  }

  /** Count one item answered with `code` (`OK` or an error code), for its model and its tenant. */
  item(code: string, tenant?: string): void {
    this.#mx.items.inc(this.#code(code))
    this.#mx.tenantItems.inc(this.#tenantCodeLabels(this.#tenants.of(tenant), code))
  }

  /** Count `n` items not run (`admission`, `overloaded` or an expiry reason). */
  shed(reason: string, n = 1): void {
    this.#mx.shed.inc(this.#reason(reason), n)
  }

  /** The queue's depth (items) and, when given, its backlog (ms of work, for autoscalers). */
  queueDepth(queued: number, backlogMs?: number): void {
    this.#mx.queueDepth.set(this.#labels, queued)
    if (backlogMs !== undefined) {
      this.#mx.backlog.set(this.#labels, backlogMs / 1000)
    }
  }

  /** Record a batch run: its compute time, size and dispatch reason. */
  batch(size: number, computeMs: number, reason: string): void {
    this.#mx.compute.observe(this.#labels, computeMs / 1000)
    this.#mx.batchSize.observe(this.#labels, size)
    this.infer.batch(size, computeMs)
    this.#mx.dispatch.inc(this.#reason(reason))
  }

  /** Record one item's time in the queue, for its model and its tenant. */
  queueWait(ms: number, tenant?: string): void {
    this.#mx.queue.observe(this.#labels, ms / 1000)
    this.#mx.tenantQueue.observe(this.#tenant(this.#tenants.of(tenant)), ms / 1000)
  }

  /** Count and log a change of the self-tuned batch cap with the figures behind it (`limit`: the configured maxBatchSize). */
  capChange(c: CapChange, logger: Logger, workerId: string, limit: number): void {
    this.#mx.capChanges.inc(this.#reason(c.reason))
    // ms per item (rate: items per ms), to the µs. It read µs under this name before 2026-12-06.
    const perItem = (rate: number) => (Number.isFinite(rate) && rate > 0 ? Math.round(1000 / rate) / 1000 : null)
    logger.info(
      {
        model: this.#labels.model,
        workerId,
        from: c.from,
        to: c.to,
        reason: c.reason,
        msPerItemFrom: perItem(c.fromRate),
        msPerItemTo: perItem(c.toRate),
        budgetMs: Number.isFinite(c.budgetMs) ? c.budgetMs : null,
        limit,
      },
      'batch cap changed',
    )
  }
}

/** Tenants named in per-tenant metrics; later ones share the label `_other` (bounded cardinality). */
export const MAX_TENANT_LABELS = 16

/** The metric label of a tenant: its id for the first {@link MAX_TENANT_LABELS} seen, else `_other`. */
class TenantLabels {
  readonly #named = new Set<string>()
  of(tenant: string | undefined): string {
    if (tenant === undefined || tenant === '') {
      return '_anonymous'
    }
    if (this.#named.has(tenant)) {
      return tenant
    }
    if (this.#named.size < MAX_TENANT_LABELS) {
      this.#named.add(tenant)
      return tenant
    }
    return '_other'
  }
}
