import { table } from './report.ts'
import type { ConfigResult, ScenarioPlan } from './scenarios.ts'
import type { StepResult } from './step-stats.ts'

/** The results of one model: every policy config, with the model's t(1), floor and SLO. */
export interface ModelResult {
  name: string
  /** t(1) in ms and how it was obtained. */
  t1Ms: number
  t1Basis: string
  /** Reference rate (req/s): the first config's closed-loop capacity; sweeps and bursts are fractions of it. */
  referenceRate: number
  /** Floor p50 (ms) of the first config (eager by default): the reference floor of the targets. */
  floorP50Ms: number
  sloMs: number
  sloBasis: string
  configs: ConfigResult[]
  /** Configs that failed, with their error. */
  errors: string[]
}

/** Everything one `cohort bench policies` run measured (the `--out` JSON). */
export interface PoliciesResult {
  startedAt: string
  commit: string
  command: string
  wallS: number
  machine: { cpu: string; cores: number; node: string; platform: string; loadAvg1m: [number, number] }
  options: { ep: string; threads: number; maxBatchSize: number; maxQueue: number | undefined; affineA: number; affineC: number; plan: ScenarioPlan }
  models: ModelResult[]
}

/** One issue target of one config: its value and whether it was met. */
export interface TargetValue {
  value: number
  met: boolean
  text: string
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : n === Number.POSITIVE_INFINITY ? 'inf' : 'n/a')
const k = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')
const mark = (ok: boolean) => (ok ? '✓' : '✗')
const pct = (x: number) => `${Math.round(x * 100)}%`

/** Max of the finite values (NaN when none). */
function maxOf(xs: number[]): number {
  const ys = xs.filter((x) => !Number.isNaN(x))
  return ys.length ? Math.max(...ys) : Number.NaN
}

function bestTimer(m: ModelResult): ConfigResult | undefined {
  return m.configs.filter((c) => c.config.policy === 'timer').sort((a, b) => b.capacityAtSlo - a.capacityAtSlo)[0]
}

/**
 * The issue's targets for one config: capacity at the SLO vs the best timer and vs 3x no
 * batching; 5%-load p50 <= 1.1 x (t(1) + floor); under 2x-4x overload goodput >= 0.97 x capacity
 * at the SLO, admitted p99 within the SLO and rejections (503/504) in <= 1 ms p99; the 10x burst
 * with every request answered or rejected within its deadline and none lost.
 */
export function targets(m: ModelResult, c: ConfigResult): Record<string, TargetValue> {
  const timer = bestTimer(m)
  const nob = m.configs.find((x) => x.config.name === 'nobatch')
  const out: Record<string, TargetValue> = {}
  if (timer && timer !== c) {
    const r = c.capacityAtSlo / timer.capacityAtSlo
    out['vsTimer'] = { value: r, met: r >= 1, text: `${f(r)} (vs ${timer.config.name})` }
  }
  if (nob && nob !== c) {
    const r = c.capacityAtSlo / nob.capacityAtSlo
    out['vsNobatch'] = { value: r, met: r >= 3, text: f(r, 1) }
  }
  const lowR = c.low.p50 / (m.t1Ms + m.floorP50Ms)
  out['lowP50'] = { value: lowR, met: lowR <= 1.1, text: `${f(lowR)} (${f(c.low.p50)} ms)` }
  const hard = c.overload.filter((s) => s.label === 'overload 2x' || s.label === 'overload 4x')
  if (hard.length > 0 && c.capacityAtSlo > 0) {
    const g = Math.min(...hard.map((s) => s.goodput / c.capacityAtSlo))
    out['goodput'] = { value: g, met: g >= 0.97, text: f(g) }
    const p = maxOf(hard.map((s) => s.p99))
    out['admittedP99'] = { value: p, met: p <= c.sloMs, text: `${f(p, 1)} ms` }
    const rj = maxOf(hard.flatMap((s) => [s.reject503P99, s.reject504P99]))
    const over = Number.isFinite(m.floorP50Ms) ? `, floor +${f(rj - m.floorP50Ms, 1)}` : ''
    out['rejectP99'] = { value: rj, met: !(rj > 1), text: Number.isNaN(rj) ? 'none' : `${f(rj, 1)} ms${over}` }
  }
  const b10 = c.bursts.find((s) => s.label === 'burst 10x')
  if (b10) {
    out['burst10'] = {
      value: b10.lost + b10.late,
      met: b10.lost === 0 && b10.late === 0,
      text: `lost ${b10.lost}, late ${b10.late}/${b10.sent} (>1.1xSLO: ${b10.lateGrace})`,
    }
  }
  return out
}

function summaryTable(m: ModelResult): string {
  const timer = bestTimer(m)
  const nob = m.configs.find((x) => x.config.name === 'nobatch')
  const at = (c: ConfigResult, get: (s: StepResult) => string) => (c.atSlo ? get(c.atSlo) : 'n/a')
  return table(
    [
      'policy',
      'closed-loop req/s',
      'b̄',
      'cap@SLO req/s',
      `/${timer?.config.name ?? 'timer'}`,
      '/nobatch',
      '5% p50',
      '5% p99',
      '@SLO p50',
      'p99',
      'p99.9',
      'thr/s',
      'goodput/s',
      'b̄@SLO',
    ],
    m.configs.map((c) => [
      c.config.name,
      k(c.capacity.requestsPerSec),
      f(c.capacity.meanBatch, 1),
      `${c.atSloOpen ? '>=' : ''}${k(c.capacityAtSlo)}`,
      timer ? f(c.capacityAtSlo / timer.capacityAtSlo) : 'n/a',
      nob ? f(c.capacityAtSlo / nob.capacityAtSlo, 1) : 'n/a',
      f(c.low.p50),
      f(c.low.p99),
      at(c, (s) => f(s.p50)),
      at(c, (s) => f(s.p99)),
      at(c, (s) => f(s.p999)),
      at(c, (s) => k(s.throughput)),
      at(c, (s) => k(s.goodput)),
      at(c, (s) => f(s.meanBatch, 1)),
    ]),
  )
}

function sweepTable(m: ModelResult, fractions: number[]): string {
  return table(
    ['p99 ms (mean batch)', ...fractions.map(pct)],
    m.configs.map((c) => [
      c.config.name,
      ...fractions.map((fr) => {
        const s = c.sweep.find((x) => Math.abs(x.fraction - fr) < 1e-9)
        return s ? `${f(s.p99, 1)} (${f(s.meanBatch, 1)})${s.meetsSlo ? '' : '*'}${(s.attempts ?? 1) > 1 ? 'r' : ''}` : 'n/a'
      }),
    ]),
  )
}

function overloadTable(m: ModelResult): string {
  const rows: string[][] = []
  for (const c of m.configs) {
    for (const s of c.overload) {
      const shed =
        Object.entries(s.shed)
          .map(([r, n]) => `${r} ${n}`)
          .join(', ') || '-'
      rows.push([
        `${c.config.name} ${s.label.replace('overload ', '')}`,
        k(s.offered),
        k(s.goodput),
        c.capacityAtSlo > 0 ? f(s.goodput / c.capacityAtSlo) : 'n/a',
        f(s.p99, 1),
        `${f(s.reject503P99, 1)} / ${f(s.reject504P99, 1)}`,
        `${s.ok}/${s.rejected503}/${s.rejected504}/${s.lost}`,
        shed,
        `${f(s.meanGatewayMs, 1)} / ${f(s.meanClientMs, 1)}`,
        f(s.lagMaxMs, 1),
      ])
    }
  }
  return table(
    ['policy load', 'offered/s', 'goodput/s', '/cap@SLO', 'admitted p99', 'reject p99 503/504', 'ok/503/504/lost', 'shed by worker', 'mean gateway/client ms', 'gen lag max'],
    rows,
  )
}

function burstTable(m: ModelResult): string {
  const rows: string[][] = []
  for (const c of m.configs) {
    for (const s of c.bursts) {
      rows.push([
        `${c.config.name} ${s.label.replace('burst ', '')}`,
        `${k(s.rate)} x ${s.durationS} s`,
        `${s.sent}`,
        `${s.ok}/${s.rejected503}/${s.rejected504}/${s.otherStatus}`,
        `${s.lost}`,
        `${s.late} / ${s.lateGrace}`,
        f(s.maxMs, 1),
        f(s.p99, 1),
        `${f(s.meanGatewayMs, 1)} / ${f(s.meanClientMs, 1)}`,
      ])
    }
  }
  return table(['policy burst', 'offered', 'sent', 'ok/503/504/other', 'lost', 'late >SLO / >1.1xSLO', 'max ms', 'ok p99', 'mean gateway/client ms'], rows)
}

function targetTable(m: ModelResult): string {
  const cols: [string, string][] = [
    ['vsTimer', 'cap@SLO vs best timer (>=1)'],
    ['vsNobatch', 'vs nobatch (>=3)'],
    ['lowP50', '5% p50/(t1+floor) (<=1.1)'],
    ['goodput', '2-4x goodput/cap (>=0.97)'],
    ['admittedP99', `2-4x admitted p99 (<=${f(m.sloMs, 1)})`],
    ['rejectP99', '2-4x reject p99 (<=1 ms)'],
    ['burst10', '10x burst: none lost or late'],
  ]
  return table(
    ['policy', ...cols.map(([, h]) => h)],
    m.configs.map((c) => {
      const t = targets(m, c)
      return [c.config.name, ...cols.map(([key]) => (t[key] ? `${mark(t[key].met)} ${t[key].text}` : '-'))]
    }),
  )
}

/**
 * Steps in which the server ran no batch at all yet answered (nearly) every request `doomed`: the
 * engine judged that no item could meet its deadline even alone, and with no batch running its
 * cost model never learns otherwise. One line per config, from the first such step on.
 */
export function stuckWarnings(m: ModelResult): string[] {
  const out: string[] = []
  for (const c of m.configs) {
    const steps = [c.floor, c.low, ...c.sweep, ...c.search, ...c.bursts, ...c.overload]
    const stuck = steps.filter((s) => s.sent > 0 && s.ok === 0 && s.batches === 0 && (s.shed['doomed'] ?? 0) >= 0.9 * s.sent)
    const first = stuck[0]
    if (first) {
      out.push(
        `${c.config.name}: from "${first.label}" (${Math.round(first.rate)} req/s) on, ${stuck.length} steps ran no batch and answered every request 504 doomed ` +
          `(cost model then: a = ${f(first.costAMs)} ms, c = ${f(first.costCMs, 3)} ms)`,
      )
    }
  }
  return out
}

/** Render the results of `cohort bench policies` as plain-text tables, targets included. */
export function formatPoliciesReport(r: PoliciesResult): string {
  const out: string[] = []
  const o = r.options
  out.push(`${r.command} @ ${r.commit}  ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}; ${f(r.wallS / 60, 1)} min`)
  out.push(
    `servers: cohort serve --threads ${o.threads} --ep ${o.ep} --max-batch-size ${o.maxBatchSize}${o.maxQueue ? ` --max-queue ${o.maxQueue}` : ''}; ` +
      `steps ${o.plan.stepS} s, Poisson open loop from a separate process (<= ${o.plan.maxSockets} sockets); load average ${f(r.machine.loadAvg1m[0])} -> ${f(r.machine.loadAvg1m[1])}`,
  )
  for (const m of r.models) {
    out.push(`\n=== ${m.name}: t(1) = ${f(m.t1Ms, 3)} ms [${m.t1Basis}]`)
    out.push(`    reference rate ${k(m.referenceRate)} req/s and floor p50 ${f(m.floorP50Ms)} ms (first config), SLO ${f(m.sloMs, 2)} ms [${m.sloBasis}]`)
    for (const e of m.errors) {
      out.push(`    FAILED ${e}`)
    }
    for (const w of stuckWarnings(m)) {
      out.push(`    WARNING ${w}`)
    }
    if (m.configs.length === 0) {
      continue
    }
    out.push("\nSummary (5% = low load, 5% of the config's own closed-loop rate; @SLO = the highest rate whose p99 over all requests met the SLO; ratios of cap@SLO)")
    out.push(summaryTable(m))
    out.push(`\nRate sweep, fractions of the reference rate ${k(m.referenceRate)} req/s: p99 of 200s in ms (mean batch); * = SLO missed, r = re-run`)
    out.push(sweepTable(m, r.options.plan.sweep))
    out.push(`\nOverload (multiples of cap@SLO, ${o.plan.stepS} s each)`)
    out.push(overloadTable(m))
    out.push(`\nBursts from idle (multiples of the reference rate, ${o.plan.burstS} s each)`)
    out.push(burstTable(m))
    out.push('\nTargets')
    out.push(targetTable(m))
  }
  return out.join('\n')
}
