import type { PeerPlan, TargetResult } from './peers-run.ts'
import type { Tuning } from './peers-targets.ts'
import type { ModelResult } from './policy-report.ts'
import { table } from './report.ts'
import { latencyThroughputSvg } from './svg.ts'

/** Everything one `cohort bench peers` run measured (the `--out` JSON). */
export interface PeersResult {
  startedAt: string
  commit: string
  command: string
  wallS: number
  machine: { cpu: string; cores: number; node: string; platform: string; loadAvg1m: [number, number] }
  /** Offline onnxruntime-node p50 of session.run at b=1, and the SLO built from it. */
  t1Ms: number
  sloMs: number
  sloBasis: string
  tuning: Tuning
  plan: PeerPlan
  targets: TargetResult[]
  /** Targets that failed, with their error. */
  errors: string[]
}

/** One issue target: its value and whether it was met. */
export interface PeerTarget {
  value: number
  met: boolean
  text: string
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : n === Number.POSITIVE_INFINITY ? 'inf' : 'n/a')
const k = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')
const mark = (ok: boolean) => (ok ? '✓' : '✗')

/**
 * Issue 8's targets: Cohort's capacity at the SLO >= 1.5x the best peer's, and a lower low-load
 * p50 than every peer with batching on. Undefined without a Cohort result or without peers.
 */
export function peerTargets(r: Pick<PeersResult, 'targets'>): { capacity: PeerTarget; lowP50: PeerTarget } | undefined {
  const cohort = r.targets.find((t) => t.name === 'cohort')
  // cohort-tuned is Cohort too, not a peer.
  const peers = r.targets.filter((t) => !t.name.startsWith('cohort'))
  if (!cohort || peers.length === 0) {
    return undefined
  }
  const best = [...peers].sort((a, b) => b.capacityAtSlo - a.capacityAtSlo)[0] as TargetResult
  const ratio = cohort.capacityAtSlo / best.capacityAtSlo
  const batching = peers.filter((t) => t.batching && Number.isFinite(t.low.p50))
  const fastest = [...batching].sort((a, b) => a.low.p50 - b.low.p50)[0]
  const lowRatio = fastest ? cohort.low.p50 / fastest.low.p50 : Number.NaN
  return {
    capacity: { value: ratio, met: ratio >= 1.5, text: `${f(ratio)}x the best peer (${best.name}, ${k(best.capacityAtSlo)} req/s)` },
    lowP50: {
      value: lowRatio,
      met: fastest !== undefined && cohort.low.p50 < fastest.low.p50,
      text: fastest ? `${f(cohort.low.p50)} ms vs ${f(fastest.low.p50)} ms (${fastest.name}, the fastest batching peer): ${f(lowRatio)}x` : 'no batching peer',
    },
  }
}

/** The summary table: absolute values and ratios against Cohort's row. */
export function summaryTable(r: Pick<PeersResult, 'targets'>): string {
  const cohort = r.targets.find((t) => t.name === 'cohort')
  const ratio = (x: number, base: number | undefined) => (base !== undefined && base > 0 ? f(x / base) : 'n/a')
  return table(
    ['server', 'closed-loop req/s', 'b̄', 'cap@SLO req/s', '/cohort', '5% rate', '5% p50 ms', '/cohort', '5% p99 ms', 'goodput@2x req/s', '/cap@SLO', 'b̄@SLO', 'b̄@2x', 'start s'],
    r.targets.map((t) => [
      t.name,
      k(t.capacity.requestsPerSec),
      f(t.capacity.meanBatch, 1),
      `${t.atSloOpen ? '>=' : ''}${k(t.capacityAtSlo)}`,
      ratio(t.capacityAtSlo, cohort?.capacityAtSlo),
      f(t.low.rate, 0),
      f(t.low.p50),
      ratio(t.low.p50, cohort?.low.p50),
      f(t.low.p99),
      k(t.overload.goodput),
      t.capacityAtSlo > 0 ? f(t.overload.goodput / t.capacityAtSlo) : 'n/a',
      f(t.atSlo?.meanBatch ?? Number.NaN, 1),
      f(t.overload.meanBatch, 1),
      f(t.startS, 0),
    ]),
  )
}

function sweepTable(r: PeersResult): string {
  const fr = r.plan.sweep
  return table(
    ['p99 ms (b̄) at', ...fr.map((x) => `${Math.round(x * 100)}%`)],
    r.targets.map((t) => [
      t.name,
      ...fr.map((x) => {
        const s = t.sweep.find((y) => Math.abs(y.fraction - x) < 1e-9)
        return s ? `${f(s.p99, 1)} (${f(s.meanBatch, 1)})${s.meetsSlo ? '' : '*'}` : 'n/a'
      }),
    ]),
  )
}

function overloadTable(r: PeersResult): string {
  return table(
    ['server', 'offered/s', 'ok/s', 'goodput/s', 'p50 ms', 'p99 ms', 'ok/503/504/other/lost'],
    r.targets.map((t) => {
      const s = t.overload
      return [t.name, k(s.offered), k(s.throughput), k(s.goodput), f(s.p50, 1), f(s.p99, 1), `${s.ok}/${s.rejected503}/${s.rejected504}/${s.otherStatus}/${s.lost}`]
    }),
  )
}

function paTable(ts: TargetResult[]): string {
  const rows: string[][] = []
  for (const t of ts) {
    const p = t.perfAnalyzer
    if (p && 'error' in p) {
      rows.push([t.name, 'failed', p.error.split('\n')[0]?.slice(0, 60) ?? '', '', ''])
      continue
    }
    for (const row of p ?? []) {
      rows.push([t.name, String(row.concurrency), k(row.throughput), f(row.p50Ms), f(row.p99Ms)])
    }
  }
  return table(['server', 'concurrency', 'infer/s', 'p50 ms', 'p99 ms'], rows)
}

/** Render a `cohort bench peers` run as plain-text tables, the targets included. */
export function formatPeersReport(r: PeersResult): string {
  const out: string[] = []
  out.push(`${r.command} @ ${r.commit}  ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}; ${f(r.wallS / 60, 1)} min`)
  out.push(
    `same model file (demo MLP 256->1024->1024->10), onnxruntime CPU, 1 intra-op thread, one instance each; steps ${r.plan.stepS} s, ` +
      `Poisson open loop from a separate process; load average ${f(r.machine.loadAvg1m[0])} -> ${f(r.machine.loadAvg1m[1])}`,
  )
  out.push(`t(1) = ${f(r.t1Ms, 3)} ms (offline onnxruntime-node), SLO p99 <= ${f(r.sloMs)} ms [${r.sloBasis}]`)
  for (const t of r.targets) {
    out.push(`  ${t.name.padEnd(15)} ${t.description}`)
  }
  for (const e of r.errors) {
    out.push(`  FAILED ${e}`)
  }
  if (r.targets.length === 0) {
    return out.join('\n')
  }
  out.push(
    `\nSummary (5% = ${Math.round(r.plan.low * 100)}% of the server's own closed-loop rate; cap@SLO = highest open-loop rate whose p99 over all requests met the SLO; ` +
      `2x = ${r.plan.overload}x cap@SLO; b̄ = mean batch size counted where the server calls session.run)`,
  )
  out.push(summaryTable(r))
  out.push(`\nRate sweep, fractions of each server's own closed-loop rate: p99 of 200s in ms (mean batch); * = SLO missed`)
  out.push(sweepTable(r))
  out.push(`\nOverload (${r.plan.overload}x cap@SLO, ${r.plan.stepS} s)`)
  out.push(overloadTable(r))
  const pa = r.targets.filter((t) => t.perfAnalyzer)
  if (pa.length > 0) {
    out.push('\nperf_analyzer (closed loop, OIP over HTTP with its binary tensor extension, 2 s windows)')
    out.push(paTable(pa))
  }
  const tg = peerTargets(r)
  if (tg) {
    out.push('\nIssue 8 targets')
    out.push(`  capacity at the SLO >= 1.5x the best peer: ${mark(tg.capacity.met)} ${tg.capacity.text}`)
    out.push(`  low-load p50 below every batching peer:   ${mark(tg.lowP50.met)} ${tg.lowP50.text}`)
  }
  return out.join('\n')
}

/** p99 vs throughput, one line per server (the policies bench's plot, fed with the targets). */
export function peersSvg(r: PeersResult): string {
  const m = {
    name: 'demo MLP, Cohort vs peers',
    t1Ms: r.t1Ms,
    sloMs: r.sloMs,
    configs: r.targets.map((t) => ({ config: { name: t.name }, sweep: t.sweep, search: t.search })),
  }
  // latencyThroughputSvg reads only these fields of a ModelResult.
  return latencyThroughputSvg(m as unknown as ModelResult).replace('per policy', 'per server')
}
