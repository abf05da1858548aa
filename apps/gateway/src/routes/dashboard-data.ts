/**
 * The dashboard's data model (pure, runtime-agnostic): snapshots of what a registry collects
 * (structured, no Prometheus text), a short history of them taken as the dashboard polls, and the JSON view the page draws
 * (rates, latency percentiles from histogram deltas, batch sizes, dispatch reasons, sheds, workers).
 * @module
 */
import { bucketCounts, bucketDeltas, histogramQuantile, type CumulativeBucket, type MetricFamily } from '@cohort/metrics'
import type { WorkerSummary } from '../discovery.ts'
import type { DashboardData, ModelRates, ModelView, Tally, WorkerInfo, WorkerModelInfo } from './dashboard-view.ts'

export type * from './dashboard-view.ts'

/** What one scrape says about one model. Histograms are cumulative buckets (last: `+Inf`). */
export interface ModelSnapshot {
  /** Gateway: HTTP inference requests by result code. */
  requests: Tally
  /** Gateway: end-to-end request duration (seconds). */
  duration?: CumulativeBucket[]
  /** Worker: time items waited before their batch started (seconds). */
  queueWait?: CumulativeBucket[]
  /** Worker: items per executed batch. */
  batchSize?: CumulativeBucket[]
  /** Worker: batches run and items in them (from the histogram, or the workers' `$SRV.STATS`). */
  batches: number
  batchSizeSum: number
  /** Worker: items answered, by code. */
  items: Tally
  /** Worker: batches by dispatch reason. */
  dispatch: Tally
  /** Worker: items answered without running, by reason. */
  shed: Tally
  /** Items queued (worker gauge, or the sum the workers report in discovery). */
  queueDepth?: number
}

/** One scrape at time `t` (ms since the epoch). */
export interface Snapshot {
  t: number
  models: Map<string, ModelSnapshot>
  /** True when the registry holds worker metrics (embedded mode). */
  workerMetrics: boolean
  /** Counters each worker reported, by `workerKey(id, model)`. */
  workers: Map<string, WorkerCounters>
}

/** Counters of one model on one worker (since the worker started). */
export interface WorkerCounters {
  requests: number
  batches: number
}

/** Key of one model on one worker in {@link Snapshot.workers}. */
export function workerKey(id: string, model: string): string {
  return `${id}\u0000${model}`
}

function emptyModel(): ModelSnapshot {
  return { requests: {}, batches: 0, batchSizeSum: 0, items: {}, dispatch: {}, shed: {} }
}

const HISTOGRAMS = {
  cohort_request_duration_seconds: 'duration',
  cohort_queue_duration_seconds: 'queueWait',
  cohort_batch_size: 'batchSize',
} as const
const TALLIES = {
  cohort_requests_total: ['requests', 'code'],
  cohort_worker_items_total: ['items', 'code'],
  cohort_batch_dispatch_total: ['dispatch', 'reason'],
  cohort_shed_total: ['shed', 'reason'],
} as const

/**
 * Read the Cohort metrics of a registry's {@link Registry.collect} into per-model snapshots.
 * Where it holds no worker metrics for a model (the gateway of a distributed deployment), its
 * queue depth and batch counts are the sums of what `workers` report.
 */
export function snapshotFromFamilies(families: readonly MetricFamily[], t: number, workers: readonly WorkerInfo[] = []): Snapshot {
  const models = new Map<string, ModelSnapshot>()
  const model = (name: string) => {
    let m = models.get(name)
    if (!m) {
      m = emptyModel()
      models.set(name, m)
    }
    return m
  }
  // Registered worker metrics are there before they have any series.
  const workerMetrics = families.some((f) => f.name === 'cohort_batch_size')
  for (const f of families) {
    if (f.type === 'histogram') {
      if (!(f.name in HISTOGRAMS)) {
        continue
      }
      const field = HISTOGRAMS[f.name as keyof typeof HISTOGRAMS]
      for (const s of f.samples) {
        const name = s.labels['model']
        if (name === undefined) {
          continue
        }
        const m = model(name)
        m[field] = s.buckets.map((b) => ({ le: b.le, count: b.count }))
        if (f.name === 'cohort_batch_size') {
          m.batchSizeSum = s.sum
          m.batches = s.count
        }
      }
      continue
    }
    for (const s of f.samples) {
      const name = s.labels['model']
      if (name === undefined || !Number.isFinite(s.value)) {
        continue
      }
      if (f.name in TALLIES) {
        const [field, label] = TALLIES[f.name as keyof typeof TALLIES]
        const m = model(name)
        const k = s.labels[label] ?? ''
        m[field][k] = (m[field][k] ?? 0) + s.value
      } else if (f.name === 'cohort_queue_depth') {
        const m = model(name)
        m.queueDepth = (m.queueDepth ?? 0) + s.value
      }
    }
  }
  const counters = new Map<string, WorkerCounters>()
  const reported = new Map<string, { queued: number; batches: number; items: number; stats: boolean }>()
  for (const w of workers) {
    for (const wm of w.models) {
      const r = reported.get(wm.name) ?? { queued: 0, batches: 0, items: 0, stats: false }
      r.queued += Number.isFinite(wm.queued) ? wm.queued : 0
      if (wm.batches !== undefined) {
        r.stats = true
        r.batches += wm.batches
        r.items += wm.batches * (wm.meanBatchSize ?? 0)
      }
      reported.set(wm.name, r)
      if (wm.requests !== undefined || wm.batches !== undefined) {
        counters.set(workerKey(w.id, wm.name), { requests: wm.requests ?? 0, batches: wm.batches ?? 0 })
      }
    }
  }
  for (const [name, r] of reported) {
    const m = model(name)
    m.queueDepth ??= r.queued
    if (!m.batchSize && r.stats) {
      m.batches = r.batches
      m.batchSizeSum = Math.round(r.items)
    }
  }
  return { t, models, workerMetrics, workers: counters }
}

/** Options of {@link DashboardHistory}. */
export interface DashboardHistoryOptions {
  /** Samples closer together than this are not kept. @default 500 */
  minIntervalMs?: number
  /** Samples kept (the charts' span is about this times the sampling interval). @default 300 */
  keep?: number
  /** A pause in polling longer than this starts the history afresh. @default 15000 */
  maxGapMs?: number
  /** Span of the "current" numbers (rates, percentiles), ms. @default 5000 */
  currentMs?: number
  /** Span of the batch-size histogram, dispatch reasons and shed counts, ms. @default 30000 */
  windowMs?: number
}

const sumTally = (t: Tally) => Object.values(t).reduce((a, b) => a + b, 0)
const nonOk = (t: Tally) => Object.entries(t).reduce((a, [k, v]) => (k === 'OK' ? a : a + v), 0)

function deltaTally(cur: Tally, prev: Tally | undefined): Tally {
  const out: Tally = {}
  for (const [k, v] of Object.entries(cur)) {
    out[k] = Math.max(0, v - (prev?.[k] ?? 0))
  }
  return out
}

function ms(seconds: number | undefined): number | null {
  return seconds === undefined ? null : round(seconds * 1000, 4)
}

function round(v: number, digits: number): number {
  const f = 10 ** digits
  return Math.round(v * f) / f
}

/** Rates of one model between two snapshots of it (either may lack the model). */
export function modelRates(cur: ModelSnapshot | undefined, prev: ModelSnapshot | undefined, dtS: number): ModelRates {
  const c = cur ?? emptyModel()
  const per = (n: number) => (dtS > 0 ? round(Math.max(0, n) / dtS, 3) : 0)
  const dur = c.duration ? bucketDeltas(c.duration, prev?.duration) : undefined
  const wait = c.queueWait ? bucketDeltas(c.queueWait, prev?.queueWait) : undefined
  const batches = c.batches - (prev?.batches ?? 0)
  const batchItems = c.batchSizeSum - (prev?.batchSizeSum ?? 0)
  return {
    rps: per(sumTally(c.requests) - sumTally(prev?.requests ?? {})),
    errorsPerS: per(nonOk(c.requests) - nonOk(prev?.requests ?? {})),
    p50Ms: dur ? ms(histogramQuantile(0.5, dur)) : null,
    p99Ms: dur ? ms(histogramQuantile(0.99, dur)) : null,
    queueP99Ms: wait ? ms(histogramQuantile(0.99, wait)) : null,
    itemsPerS: per(sumTally(c.items) - sumTally(prev?.items ?? {})),
    batchesPerS: per(batches),
    meanBatch: batches > 0 ? round(batchItems / batches, 2) : null,
    shedPerS: per(sumTally(c.shed) - sumTally(prev?.shed ?? {})),
    queueDepth: c.queueDepth ?? null,
  }
}

/**
 * Samples taken as the dashboard polls (no timers: the gateway runs on edge runtimes too), and
 * the view computed from them. Keeps one sample per `minIntervalMs` at most.
 */
export class DashboardHistory {
  readonly #samples: Snapshot[] = []
  readonly #o: Required<DashboardHistoryOptions>

  constructor(o: DashboardHistoryOptions = {}) {
    this.#o = { minIntervalMs: 500, keep: 300, maxGapMs: 15_000, currentMs: 5_000, windowMs: 30_000, ...o }
  }

  /** Whether a sample taken at `t` would be kept. */
  due(t: number): boolean {
    const last = this.#samples[this.#samples.length - 1]
    return !last || t - last.t >= this.#o.minIntervalMs
  }

  /** Keep a sample (ignored when too close to the last one). */
  add(s: Snapshot): void {
    const last = this.#samples[this.#samples.length - 1]
    if (last && s.t - last.t < this.#o.minIntervalMs) {
      return
    }
    if (last && s.t - last.t > this.#o.maxGapMs) {
      this.#samples.length = 0 // Nobody watched for a while: rates across the gap would mislead.
    }
    this.#samples.push(s)
    if (this.#samples.length > this.#o.keep) {
      this.#samples.splice(0, this.#samples.length - this.#o.keep)
    }
  }

  /** Samples kept. */
  get size(): number {
    return this.#samples.length
  }

  /** The newest sample no later than `t - spanMs` (or the oldest one). */
  #before(spanMs: number): Snapshot | undefined {
    const [first] = this.#samples
    const last = this.#samples[this.#samples.length - 1]
    if (!first || !last || this.#samples.length < 2) {
      return undefined
    }
    let pick = first
    for (const s of this.#samples) {
      if (s === last || last.t - s.t < spanMs) {
        break
      }
      pick = s
    }
    return pick
  }

  /** The dashboard's JSON. */
  view(workers: WorkerInfo[], workersSource: string): DashboardData {
    const samples = this.#samples
    const last = samples[samples.length - 1]
    const names = modelNames(samples, workers)
    const currentBase = this.#before(this.#o.currentMs)
    const windowBase = this.#before(this.#o.windowMs)
    const models: ModelView[] = names.map((name) => {
      const cur = last?.models.get(name)
      const c = cur ?? emptyModel()
      const cb = currentBase?.models.get(name)
      const wb = windowBase?.models.get(name)
      const current = last && currentBase ? modelRates(cur, cb, (last.t - currentBase.t) / 1000) : { ...modelRates(undefined, undefined, 0), queueDepth: c.queueDepth ?? null }
      const series = modelSeries(samples, name)
      const batchTotal = c.batchSize ? bucketCounts(c.batchSize) : []
      const batchWindow = c.batchSize ? bucketCounts(windowBase ? bucketDeltas(c.batchSize, wb?.batchSize) : c.batchSize) : []
      return {
        name,
        current,
        totals: {
          requests: sumTally(c.requests),
          errors: nonOk(c.requests),
          items: sumTally(c.items),
          batches: c.batches,
          shed: sumTally(c.shed),
        },
        batchSizes: { window: batchWindow, total: batchTotal },
        dispatch: { window: windowBase ? deltaTally(c.dispatch, wb?.dispatch) : { ...c.dispatch }, total: { ...c.dispatch } },
        shed: { window: windowBase ? deltaTally(c.shed, wb?.shed) : { ...c.shed }, total: { ...c.shed } },
        series,
      }
    })
    const spanS = last && currentBase ? (last.t - currentBase.t) / 1000 : 0
    const withRates = workers.map((w) => ({
      ...w,
      models: w.models.map((m) => {
        const k = workerKey(w.id, m.name)
        const a = currentBase?.workers.get(k)
        const z = last?.workers.get(k)
        return { ...m, rps: a && z && spanS > 0 ? round(Math.max(0, z.requests - a.requests) / spanS, 3) : null }
      }),
    }))
    return {
      v: 1,
      now: last?.t ?? 0,
      currentS: this.#o.currentMs / 1000,
      windowS: this.#o.windowMs / 1000,
      workerMetrics: samples.some((s) => s.workerMetrics),
      models,
      workers: withRates,
      workersSource,
    }
  }
}

/**
 * The models to show, sorted: every name seen in the samples or served by a worker, less the names
 * no worker serves that only ever answered MODEL_NOT_FOUND (404s: typos, scanners are not models).
 */
function modelNames(samples: readonly Snapshot[], workers: readonly WorkerInfo[]): string[] {
  const last = samples[samples.length - 1]
  const names = new Set<string>()
  for (const s of samples) {
    for (const n of s.models.keys()) {
      names.add(n)
    }
  }
  const served = new Set<string>()
  for (const w of workers) {
    for (const m of w.models) {
      served.add(m.name)
    }
  }
  for (const n of names) {
    const codes = Object.keys(last?.models.get(n)?.requests ?? {})
    if (!served.has(n) && codes.length > 0 && codes.every((c) => c === 'MODEL_NOT_FOUND')) {
      names.delete(n)
    }
  }
  for (const n of served) {
    names.add(n)
  }
  return [...names].sort()
}

/** One model's rates between each pair of consecutive samples (the charts). */
function modelSeries(samples: readonly Snapshot[], name: string): ModelView['series'] {
  const series: ModelView['series'] = { t: [], rps: [], p50Ms: [], p99Ms: [], queueDepth: [], meanBatch: [], itemsPerS: [] }
  let a: Snapshot | undefined
  for (const b of samples) {
    if (a !== undefined) {
      const r = modelRates(b.models.get(name), a.models.get(name), (b.t - a.t) / 1000)
      series.t.push(b.t)
      series.rps.push(r.rps)
      series.p50Ms.push(r.p50Ms)
      series.p99Ms.push(r.p99Ms)
      series.queueDepth.push(r.queueDepth)
      series.meanBatch.push(r.meanBatch)
      series.itemsPerS.push(r.itemsPerS)
    }
    a = b
  }
  return series
}

/** Read one worker's discovery answer (`{worker, models}`); undefined when it is not one. */
export function workerFromDiscovery(v: unknown, fallbackId: string): WorkerInfo | undefined {
  if (typeof v !== 'object' || v === null) {
    return undefined
  }
  const o = v as { worker?: unknown; models?: unknown }
  if (!Array.isArray(o.models)) {
    return undefined
  }
  const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : undefined)
  const models: WorkerModelInfo[] = []
  for (const m of o.models as unknown[]) {
    if (typeof m !== 'object' || m === null || typeof (m as { name?: unknown }).name !== 'string') {
      continue
    }
    const r = m as Record<string, unknown>
    const cost = r['cost'] as { a?: unknown; c?: unknown; samples?: unknown } | undefined
    const a = num(cost?.a)
    const cc = num(cost?.c)
    const maxQueue = num(r['maxQueue'])
    const maxDelayMs = num(r['maxDelayMs'])
    models.push({
      name: r['name'] as string,
      ready: r['ready'] === true,
      queued: num(r['queued']) ?? 0,
      maxBatchSize: num(r['maxBatchSize']) ?? 0,
      ...(maxQueue !== undefined ? { maxQueue } : {}),
      ...(maxDelayMs !== undefined ? { maxDelayMs } : {}),
      ...(typeof r['policy'] === 'string' ? { policy: r['policy'] } : {}),
      ...(a !== undefined && cc !== undefined ? { cost: { a, c: cc, samples: num(cost?.samples) ?? 0 } } : {}),
    })
  }
  return { id: typeof o.worker === 'string' && o.worker ? o.worker : fallbackId, models }
}

/**
 * The worker list: the `$SRV.INFO`/`$SRV.STATS` summaries (load counters, state), completed with
 * what the same workers answered on discovery (learned cost, queue bound); workers that answer
 * discovery only (older ones) are listed from it. Sorted by id.
 */
export function mergeWorkers(services: readonly WorkerSummary[], discovered: readonly WorkerInfo[]): WorkerInfo[] {
  const byId = new Map(discovered.map((w) => [w.id, w]))
  const out = new Map<string, WorkerInfo>()
  for (const s of services) {
    const d = byId.get(s.id)
    out.set(s.id, {
      id: s.id,
      state: s.state,
      models: s.endpoints.map((e): WorkerModelInfo => {
        const dm = d?.models.find((m) => m.name === e.model)
        const opt = <K extends keyof WorkerModelInfo>(k: K, v: WorkerModelInfo[K] | null | undefined) => (v === null || v === undefined ? {} : { [k]: v })
        return {
          name: e.model,
          ready: e.ready,
          queued: e.queued ?? dm?.queued ?? 0,
          maxBatchSize: e.max_batch_size ?? dm?.maxBatchSize ?? 0,
          ...opt('running', e.running),
          ...opt('maxQueue', dm?.maxQueue),
          ...opt('maxDelayMs', e.max_delay_ms ?? dm?.maxDelayMs),
          ...opt('policy', e.policy ?? dm?.policy),
          ...opt('concurrency', e.concurrency),
          ...opt('requests', e.requests),
          ...opt('errors', e.errors),
          ...opt('batches', e.batches),
          ...opt('meanBatchSize', e.mean_batch_size),
          ...opt('avgProcessingMs', e.average_processing_ms),
          ...opt('cost', dm?.cost),
        }
      }),
    })
  }
  for (const d of discovered) {
    if (!out.has(d.id)) {
      out.set(d.id, d)
    }
  }
  return [...out.values()].sort((a, b) => a.id.localeCompare(b.id))
}
