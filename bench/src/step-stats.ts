import { parsePrometheus } from '@cohort/metrics'
import type { LoadRecords } from './poisson.ts'
import { percentile } from './stats.ts'

/** Server-side totals of one model, read from `/metrics`. */
export interface MetricTotals {
  /** `cohort_batch_size` sum and count. */
  batchSum: number
  batchCount: number
  /** `cohort_compute_duration_seconds` sum (s) and count. */
  computeSum: number
  computeCount: number
  /** `cohort_request_duration_seconds` sum (s) and count: the gateway's own view of a request. */
  requestSum: number
  requestCount: number
  /** `cohort_cost_model_a_seconds` and `_c_seconds` (gauges: the engine's learned t(b) = a + c*b). */
  costA: number
  costC: number
  /** `cohort_shed_total` by reason. */
  shed: Record<string, number>
}

const SUMS: Record<string, Exclude<keyof MetricTotals, 'shed' | 'costA' | 'costC'>> = {
  cohort_batch_size_sum: 'batchSum',
  cohort_batch_size_count: 'batchCount',
  cohort_compute_duration_seconds_sum: 'computeSum',
  cohort_compute_duration_seconds_count: 'computeCount',
  cohort_request_duration_seconds_sum: 'requestSum',
  cohort_request_duration_seconds_count: 'requestCount',
}

/** Read the batch-size, compute-time and shed totals of `model` from a Prometheus /metrics URL. */
export async function metricTotals(metricsUrl: string, model: string): Promise<MetricTotals> {
  const r = await fetch(metricsUrl)
  if (!r.ok) {
    throw new Error(`GET ${metricsUrl}: HTTP ${r.status}`)
  }
  const t: MetricTotals = { batchSum: 0, batchCount: 0, computeSum: 0, computeCount: 0, requestSum: 0, requestCount: 0, costA: Number.NaN, costC: Number.NaN, shed: {} }
  const label = `model="${model}"`
  for (const [k, v] of parsePrometheus(await r.text())) {
    if (!k.includes(label)) {
      continue
    }
    const name = k.slice(0, k.indexOf('{'))
    const key = SUMS[name]
    if (key) {
      t[key] += v
    } else if (name === 'cohort_cost_model_a_seconds') {
      t.costA = v * 1000
    } else if (name === 'cohort_cost_model_c_seconds') {
      t.costC = v * 1000
    } else if (name === 'cohort_shed_total') {
      const reason = /reason="([^"]*)"/.exec(k)?.[1] ?? '?'
      t.shed[reason] = (t.shed[reason] ?? 0) + v
    }
  }
  return t
}

/** One measured load step (one rate, one policy config). Latencies in ms, rates per second. */
export interface StepResult {
  /** e.g. `sweep 50%`, `overload 2x`, `burst 10x`. */
  label: string
  /** Offered (scheduled) rate. */
  rate: number
  /** Rate as a multiple of the config's reference capacity. */
  fraction: number
  durationS: number
  sent: number
  /** sent / duration: the rate the Poisson schedule actually had. */
  offered: number
  ok: number
  /** 503 answers (queue full) and 504 answers (deadline / doomed). */
  rejected503: number
  rejected504: number
  /** Answers with any other status. */
  otherStatus: number
  /** No answer, or a socket error. */
  lost: number
  /** ok / duration. */
  throughput: number
  /** ok within the SLO / duration. */
  goodput: number
  /** Of the 200 answers. */
  p50: number
  p99: number
  p999: number
  /** p99 over every request, a request that got no 200 counting as infinitely late. */
  p99All: number
  /** p99 latency of 503 and of 504 answers. */
  reject503P99: number
  reject504P99: number
  /** Slowest answer of any status. */
  maxMs: number
  /** Answers (any status) later than the SLO, and later than SLO * 1.1. */
  late: number
  lateGrace: number
  /** Generator lag behind its schedule. */
  lagMaxMs: number
  lagP99Ms: number
  /** Δbatch_size_sum / Δbatch_size_count during the step. */
  meanBatch: number
  batches: number
  /** Mean compute ms per batch during the step. */
  meanComputeMs: number
  /** Mean time in the gateway (its `cohort_request_duration_seconds`), and mean client latency
   * of the answered requests: the difference was spent before the gateway's handler ran
   * (generator lag, client and kernel queues, HTTP parsing) or after it returned. */
  meanGatewayMs: number
  meanClientMs: number
  /** Items shed by the worker, by reason. */
  shed: Record<string, number>
  /** The engine's cost model after the step: t(b) = costAMs + costCMs * b. */
  costAMs: number
  costCMs: number
  /** p99All <= SLO. */
  meetsSlo: boolean
  /** Runs of this step (> 1: re-run because the generator lagged while the SLO was missed). */
  attempts?: number
}

const asc = (a: number, b: number) => a - b

/** Requests shed during the step, per reason (the reasons with none left out). */
function shedDuring(before: MetricTotals, after: MetricTotals): Record<string, number> {
  const shed: Record<string, number> = {}
  for (const [k, v] of Object.entries(after.shed)) {
    const d = v - (before.shed[k] ?? 0)
    if (d > 0) {
      shed[k] = d
    }
  }
  return shed
}

/**
 * Summarise one step: its per-request records plus the server's metric totals before and after.
 * `sloMs` decides goodput, p99All and lateness.
 */
export function summariseStep(label: string, fraction: number, rate: number, r: LoadRecords, sloMs: number, before: MetricTotals, after: MetricTotals): StepResult {
  const ok: number[] = []
  const r503: number[] = []
  const r504: number[] = []
  let other = 0
  let lost = 0
  let good = 0
  let late = 0
  let lateGrace = 0
  let maxMs = 0
  let answered = 0
  let answeredSum = 0
  for (let i = 0; i < r.status.length; i++) {
    const s = r.status[i] as number
    const l = r.latencyMs[i] as number
    if (s <= 0) {
      lost++
      continue
    }
    maxMs = Math.max(maxMs, l)
    answered++
    answeredSum += l
    late += l > sloMs ? 1 : 0
    lateGrace += l > sloMs * 1.1 ? 1 : 0
    if (s === 200) {
      ok.push(l)
      good += l <= sloMs ? 1 : 0
    } else if (s === 503) {
      r503.push(l)
    } else if (s === 504) {
      r504.push(l)
    } else {
      other++
    }
  }
  ok.sort(asc)
  r503.sort(asc)
  r504.sort(asc)
  const n = r.status.length
  // p99 over all requests: the non-200 ones sort last, as +Infinity.
  const rank = Math.max(1, Math.ceil(0.99 * n))
  const p99All = n === 0 ? Number.NaN : rank <= ok.length ? (ok[rank - 1] as number) : Number.POSITIVE_INFINITY
  const batches = after.batchCount - before.batchCount
  const shed = shedDuring(before, after)
  return {
    label,
    rate,
    fraction,
    durationS: r.durationS,
    sent: n,
    offered: n / r.durationS,
    ok: ok.length,
    rejected503: r503.length,
    rejected504: r504.length,
    otherStatus: other,
    lost,
    throughput: ok.length / r.durationS,
    goodput: good / r.durationS,
    p50: percentile(ok, 50),
    p99: percentile(ok, 99),
    p999: percentile(ok, 99.9),
    p99All,
    reject503P99: percentile(r503, 99),
    reject504P99: percentile(r504, 99),
    maxMs,
    late,
    lateGrace,
    lagMaxMs: r.lagMaxMs,
    lagP99Ms: r.lagP99Ms,
    meanBatch: batches > 0 ? (after.batchSum - before.batchSum) / batches : Number.NaN,
    batches,
    meanComputeMs: batches > 0 ? ((after.computeSum - before.computeSum) * 1000) / (after.computeCount - before.computeCount) : Number.NaN,
    meanGatewayMs: after.requestCount > before.requestCount ? ((after.requestSum - before.requestSum) * 1000) / (after.requestCount - before.requestCount) : Number.NaN,
    meanClientMs: answered > 0 ? answeredSum / answered : Number.NaN,
    shed,
    costAMs: after.costA,
    costCMs: after.costC,
    meetsSlo: p99All <= sloMs,
  }
}
