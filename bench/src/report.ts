import type { SaturationResult } from './wrk.ts'
import type { OfflinePoint } from './offline.ts'
import type { Mode } from './served.ts'
import type { LatencySummary } from './stats.ts'

/** The served measurements of one mode, with their ratios against the offline baseline. */
export interface ModeResult {
  mode: Mode
  /** Saturation run (1 item per request; requestsPerSec counts 2xx answers only, `non2xx` the refused). */
  saturation: SaturationResult
  /** Mean `cohort_batch_size` of the demo model during the saturation run. */
  meanBatch: number
  /** Batches executed during the saturation run. */
  batches: number
  /** Offline items/s at the max batch size. */
  offlineAtMax: number
  /** Offline items/s at the observed mean batch size (ms/batch interpolated). */
  offlineAtMean: number
  /** saturation.requestsPerSec / offlineAtMax. */
  ratioMax: number
  /** saturation.requestsPerSec / offlineAtMean. */
  ratioMean: number
  /** `cohort_batch_cap` of the served model after the saturation run (the self-tuned cap). */
  batchCap: number
  /** Best offline items/s over every batch size measured, and its batch size. */
  offlineBest: number
  offlineBestBatch: number
  /** saturation.requestsPerSec / offlineBest. */
  ratioBest: number
  /** CPU ms of the model's process (worker, or `cohort serve` embedded) per item during saturation (/proc). */
  cpuPerItemMs: number
  /** Offline CPU ms per item at the observed mean batch size (interpolated). */
  offlineCpuAtMean: number
  /** cpuPerItemMs / offlineCpuAtMean. */
  cpuRatio: number
  /** CPU s/s of the model's process during saturation (/proc): how busy its cores were. */
  modelCpuPerSec?: number
  /** Of modelCpuPerSec: the main thread's and the busiest other thread's (the ORT host thread). */
  modelThreadsCpuPerSec?: { main: number; busiest: number }
  /** CPU ms per item of the path's other processes (nats: gateway + nats-server) during saturation; NaN embedded. */
  otherCpuPerItemMs?: number
  /** With `--pin`: the cores of the model's process (or, `thread`, of its ORT host thread only) and of everything else (taskset lists). */
  pinned?: { model: string; others: string; thread?: true }
  /** Sequential paced demo requests. */
  lowLoad: LatencySummary
  /** Sequential `floor` (Identity) requests: the transport floor. */
  floor: LatencySummary
  /** p50 of the floor model under `wrk -c1` (no Node client in the loop); NaN without wrk. */
  floorWrkP50Ms: number
  /** Offline median ms per session.run at b=1. */
  t1Ms: number
  /** lowLoad.p50Ms / (t1Ms + floor.p50Ms). */
  ratioP50: number
}

/** Everything one `cohort bench` run measured. */
export interface BenchResult {
  startedAt: string
  /** Short git commit of the code measured (`+dirty` with uncommitted changes). */
  commit: string
  machine: {
    cpu: string
    cores: number
    node: string
    platform: string
    /** 1-minute load average at the start and at the end of the run (other work on the machine). */
    loadAvg1m: [number, number]
  }
  config: {
    /** ONNX Runtime execution provider (offline and served). */
    ep?: string
    threads: number
    maxBatchSize: number
    /** True when `--max-batch-size` was given (else the worker's default: self-tuned up to maxBatchSize). */
    userMaxBatch?: boolean
    durationS: number
    connections: number
    modes: Mode[]
    lowLoadRate: number
    lowLoadSeconds: number
    floorRequests: number
    offlineSeconds: number
  }
  offline: OfflinePoint[]
  served: ModeResult[]
}

/** A plain-text table: first column left-aligned, the others right-aligned, indented by two. */
export function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i] ?? 0) : c.padStart(w[i] ?? 0))).join('  ')
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].map((l) => `  ${l}`).join('\n')
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a')
const k = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')

/** Render the results as the plain-text tables `cohort bench` prints. */
export function formatReport(r: BenchResult): string {
  const out: string[] = []
  const c = r.config
  out.push(
    `cohort bench @ ${r.commit}  ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}; ` +
      `ep=${c.ep ?? 'cpu'} threads=${c.threads} max-batch=${c.userMaxBatch === false ? `default (self-tuned, limit ${c.maxBatchSize})` : c.maxBatchSize} wrk -c${c.connections} -d${c.durationS}s`,
  )
  const [l0, l1] = r.machine.loadAvg1m
  out.push(`load average (1 min) at start ${f(l0)}, at end ${f(l1)}: this run's own load is ~2; more means other work shared the cores`)
  out.push('\nOffline (onnxruntime-node in-process, the same model file as served)')
  out.push(
    table(
      ['batch', 'ms/batch', 'p50 ms', 'items/s', 'CPU ms/item', 'iters'],
      r.offline.map((p) => [String(p.batch), f(p.msPerBatch, 3), f(p.p50Ms, 3), k(p.itemsPerSec), f(p.cpuMsPerItem, 3), String(p.iterations)]),
    ),
  )
  if (r.served.length === 0) {
    return out.join('\n')
  }
  const cols = r.served.map((s) => s.mode)
  const rows: [string, (s: ModeResult) => string][] = [
    ['load generator', (s) => `${s.saturation.tool} -c${c.connections}${s.pinned ? ` (cpu ${s.pinned.others})` : ''}`],
    ['model process cores', (s) => (s.pinned ? (s.pinned.thread ? `ORT thread alone on cpu ${s.pinned.model}` : `cpu ${s.pinned.model} alone`) : 'shared')],
    ['served items/s (saturation, 2xx)', (s) => k(s.saturation.requestsPerSec)],
    ['  refused (non-2xx) at saturation', (s) => `${k(s.saturation.non2xx)} of ${k(s.saturation.requests)}`],
    ['  latency p50 / p99 at saturation (ms)', (s) => `${f(s.saturation.p50Ms)} / ${f(s.saturation.p99Ms)}`],
    ['mean batch size (saturation)', (s) => `${f(s.meanBatch)} (${k(s.batches)} batches)`],
    [`offline items/s at max batch ${c.maxBatchSize}`, (s) => k(s.offlineAtMax)],
    ['offline items/s at mean batch', (s) => k(s.offlineAtMean)],
    ['served / offline(max batch)', (s) => f(s.ratioMax)],
    ['served / offline(mean batch)', (s) => f(s.ratioMean)],
    ['batch cap after saturation (cohort_batch_cap)', (s) => f(s.batchCap, 0)],
    ['offline best items/s (batch)', (s) => `${k(s.offlineBest)} (${f(s.offlineBestBatch, 0)})`],
    ['served / offline best', (s) => f(s.ratioBest)],
    ['model process CPU ms/item (saturation)', (s) => f(s.cpuPerItemMs, 3)],
    ['  model process CPU s/s (saturation)', (s) => f(s.modelCpuPerSec ?? Number.NaN)],
    ['    main thread / busiest other (ORT) s/s', (s) => (s.modelThreadsCpuPerSec ? `${f(s.modelThreadsCpuPerSec.main)} / ${f(s.modelThreadsCpuPerSec.busiest)}` : 'n/a')],
    ['gateway + nats-server CPU ms/item', (s) => f(s.otherCpuPerItemMs ?? Number.NaN, 3)],
    ['offline CPU ms/item at mean batch', (s) => f(s.offlineCpuAtMean, 3)],
    ['CPU/item served / offline', (s) => f(s.cpuRatio)],
    [`low-load p50 / p99 (ms, ${c.lowLoadRate} req/s)`, (s) => `${f(s.lowLoad.p50Ms)} / ${f(s.lowLoad.p99Ms)}`],
    ['t(1) offline p50 ms at b=1', (s) => f(s.t1Ms, 3)],
    ['floor p50 (Identity model, ms)', (s) => f(s.floor.p50Ms)],
    ['  floor p50 under wrk -c1 (ms)', (s) => f(s.floorWrkP50Ms)],
    ['low-load p50 / (t(1) + floor)', (s) => f(s.ratioP50)],
  ]
  out.push('\nServed (HTTP POST /v2/models/demo/infer, 1 item per request)')
  out.push(
    table(
      ['', ...cols],
      rows.map(([name, get]) => [name, ...r.served.map(get)]),
    ),
  )
  return out.join('\n')
}
