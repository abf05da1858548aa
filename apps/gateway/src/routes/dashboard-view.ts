/**
 * The JSON of `GET /dashboard/data`: types shared by the gateway (dashboard-data.ts) and the page
 * (dashboard-client/), so that the page is type-checked against what the gateway sends. Types only.
 * @module
 */

/** One histogram bucket: `count` observations up to `le` (cumulative or per bucket, as documented where used). */
export interface Bucket {
  le: number
  count: number
}

/** Counts by a label value (code, reason). */
export type Tally = Record<string, number>

/** One model on one worker, as the worker reports it in discovery. */
export interface WorkerModelInfo {
  name: string
  ready: boolean
  /** Items waiting for a batch. */
  queued: number
  /** Items in batches running now (`$SRV.STATS`). */
  running?: number
  maxBatchSize: number
  maxQueue?: number
  maxDelayMs?: number
  policy?: string
  /** Batches the model runs at once on this worker. */
  concurrency?: number
  /** Counters since the worker started (`$SRV.STATS`). */
  requests?: number
  errors?: number
  batches?: number
  meanBatchSize?: number
  /** Mean receipt-to-reply time in the worker, ms. */
  avgProcessingMs?: number
  /** Learned batch cost t(b) = a + c*b, ms (discovery). */
  cost?: { a: number; c: number; samples: number }
  /** Requests per second over the dashboard's current span (set by the view). */
  rps?: number | null
}

/** A worker and its load. */
export interface WorkerInfo {
  id: string
  /** `serving` or `draining` (`$SRV`); absent for workers that answer discovery only. */
  state?: string
  models: WorkerModelInfo[]
}

/** Rates and percentiles of one model over one span. */
export interface ModelRates {
  /** HTTP inference requests per second (all codes). */
  rps: number
  /** Non-OK HTTP requests per second. */
  errorsPerS: number
  /** End-to-end latency percentiles, ms (null without requests in the span). */
  p50Ms: number | null
  p99Ms: number | null
  /** Queue wait p99 in the worker, ms (embedded mode). */
  queueP99Ms: number | null
  /** Items answered and batches run per second by the worker (embedded mode). */
  itemsPerS: number
  batchesPerS: number
  /** Mean items per batch (null without batches in the span). */
  meanBatch: number | null
  /** Items shed per second. */
  shedPerS: number
  /** Items queued at the end of the span. */
  queueDepth: number | null
}

/** One model in {@link DashboardData}. */
export interface ModelView {
  name: string
  /** Over the last `currentS` seconds. */
  current: ModelRates
  /** Since the process started (counters). */
  totals: { requests: number; errors: number; items: number; batches: number; shed: number }
  /**
   * Per-bucket counts (not cumulative) of batch sizes: over the window and since start. The last
   * bucket's `le` is `Infinity`, which JSON writes as `null`.
   */
  batchSizes: { window: Bucket[]; total: Bucket[] }
  dispatch: { window: Tally; total: Tally }
  shed: { window: Tally; total: Tally }
  /** One point per interval between samples; `t` in ms since the epoch. */
  series: {
    t: number[]
    rps: number[]
    p50Ms: (number | null)[]
    p99Ms: (number | null)[]
    queueDepth: (number | null)[]
    meanBatch: (number | null)[]
    itemsPerS: number[]
  }
}

/** The JSON of `GET /dashboard/data`. */
export interface DashboardData {
  v: 1
  /** Time of the newest sample, ms since the epoch. */
  now: number
  /** Spans, seconds. */
  currentS: number
  windowS: number
  /** True when the gateway's registry includes worker metrics (embedded mode). */
  workerMetrics: boolean
  models: ModelView[]
  workers: WorkerInfo[]
  /** Where the worker list comes from. */
  workersSource: string
}
