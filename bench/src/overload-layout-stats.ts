import { table } from './report.ts'
import { deadlineLabel, type OverloadStep } from './overload-stats.ts'

/**
 * The arithmetic of `cohort bench overload` per layout (issue 27): gateway CPU per answer and per
 * refusal from /proc deltas, the worker's busy fraction, requests with no answer, log lines, and
 * the issue's targets as a table. Pure: no I/O.
 *
 * CPU per refusal is measured, not attributed: each layout runs a refusal-only phase (an open-loop
 * flood at many times capacity with a short client deadline, so the door refuses nearly every
 * request 503 before publishing it); the gateway's CPU over that phase (/proc) divided by its 503s is the
 * CPU of one refusal, an upper bound: the phase's other requests (the door admits what fits,
 * 5-15% of them) are charged to the refusals. The net figure takes those answers off at the CPU
 * of one open-loop answer (the answer-only phase) before dividing; the target judges the net one.
 * It is compared with the CPU of one answer at closed-loop capacity (the issue's ratio) and of one
 * answer in an answer-only open-loop phase (the same generator, nothing refused).
 * @module
 */

/** CPU seconds each process used over a window (utime + stime, /proc/PID/stat). */
export type CpuSeconds = Record<string, number>

/** A measured window: wall time, CPU per process, and what the gateway wrote to its log. */
export interface Metered {
  wallS: number
  cpuS: CpuSeconds
  /** Lines and bytes the gateway (or `cohort serve`) wrote to stdout + stderr in the window. */
  logLines: number
  logBytes: number
}

/** One open-loop step with its meters. */
export type LayoutStep = OverloadStep & Metered

/** The closed-loop capacity run (wrk). */
export interface CapacityRun extends Metered {
  /** 200s per second. */
  rate: number
  /** 200s in the run. */
  answers: number
  non2xx: number
  p99Ms: number
}

/** Everything measured for one layout. */
export interface LayoutResult {
  /** `shared`, `pinned` or `serve`. */
  layout: string
  /** How the processes were placed. */
  describe: string
  /** The process whose CPU is the gateway's (`gateway`; `serve` for the embedded one). */
  gatewayProc: string
  /** The process whose CPU is the model's (`worker`; undefined when it shares the gateway's process). */
  workerProc: string | undefined
  /** Median latency at one connection (wrk -c1): t(1) plus the serving path, ms. */
  t1Ms: number
  /** The same for the Identity model: the serving path alone, ms (t(1) is about the difference). */
  pathMs: number
  /** Closed-loop 200s/s of the same stack serving an Identity model: the ceiling without model compute. */
  ceiling: number
  capacity: CapacityRun
  /** 2x and 4x with the client deadline, 2x with none (the server SLO). */
  steps: LayoutStep[]
  /** The two tenants (one window: both vegeta processes at once). */
  tenants: { flood: LayoutStep; quiet: LayoutStep } | undefined
  /** The refusal-only phase: a flood at many times capacity with a short client deadline (nearly every request refused 503). */
  refusalPhase: LayoutStep | undefined
  /** The answer-only phase: open loop below capacity with no client deadline (nothing refused). */
  answerPhase: LayoutStep | undefined
  errors: string[]
}

/** Requests of a step that got no answer: timed out at the client, socket errors, never sent. */
export function noAnswer(s: Pick<OverloadStep, 'byStatus'>): number {
  return (s.byStatus['lost'] ?? 0) + (s.byStatus['socket'] ?? 0) + (s.byStatus['unsent'] ?? 0)
}

/** 200s of a step. */
export function answers(s: Pick<OverloadStep, 'byStatus'>): number {
  return s.byStatus['200'] ?? 0
}

/** CPU µs of `proc` per answer in the capacity run. */
export function cpuPerAnswerUs(c: CapacityRun, proc: string): number {
  return c.answers > 0 ? ((c.cpuS[proc] ?? Number.NaN) * 1e6) / c.answers : Number.NaN
}

/** 503s of a step: the refusals. */
export function refusals(s: Pick<OverloadStep, 'byStatus'>): number {
  return s.byStatus['503'] ?? 0
}

/**
 * CPU µs of `proc` per refusal in a refusal-only phase: all its CPU over its 503s (NaN without a
 * 503); with `perAnswerUs`, net of the phase's other requests, each charged that much.
 */
export function cpuPerRefusalUs(p: LayoutStep, proc: string, perAnswerUs = 0): number {
  const others = p.sent - refusals(p)
  return refusals(p) > 0 ? ((p.cpuS[proc] ?? Number.NaN) * 1e6 - others * perAnswerUs) / refusals(p) : Number.NaN
}

/** CPU µs of `proc` per answer in an answer-only open-loop phase: all its CPU over its 200s (NaN without a 200). */
export function cpuPerOpenAnswerUs(p: LayoutStep, proc: string): number {
  return answers(p) > 0 ? ((p.cpuS[proc] ?? Number.NaN) * 1e6) / answers(p) : Number.NaN
}

/** CPU µs of `proc` per request sent in a step (answers and refusals together). */
export function cpuPerRequestUs(s: LayoutStep, proc: string): number {
  return s.sent > 0 ? ((s.cpuS[proc] ?? Number.NaN) * 1e6) / s.sent : Number.NaN
}

/** The worker's CPU s/s in the step over the same at closed-loop capacity (NaN without a worker process). */
export function busyFraction(s: Metered, c: Metered, workerProc: string | undefined): number {
  if (workerProc === undefined) {
    return Number.NaN
  }
  const at = (m: Metered) => (m.cpuS[workerProc] ?? Number.NaN) / m.wallS
  return at(s) / at(c)
}

/** The issue's targets. */
export const TARGETS = { goodput: 0.85, refusalP99Ms: 50, quiet: 0.9, refusalCpu: 0.2, busy: 0.9 } as const

/** One row of the target table. */
export interface LayoutTargetRow {
  target: string
  layout: string
  where: string
  measured: string
  /** undefined: nothing to judge (e.g. no refusal happened). */
  met: boolean | undefined
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a')
const k = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')

/** Issue 27's targets for each layout, one row per step they name. */
export function layoutTargets(layouts: LayoutResult[]): LayoutTargetRow[] {
  const rows: LayoutTargetRow[] = []
  for (const l of layouts) {
    const where = (s: OverloadStep) => `${s.label}, ${deadlineLabel(s)}`
    for (const s of l.steps) {
      rows.push({
        target: `goodput >= ${TARGETS.goodput} x capacity`,
        layout: l.layout,
        where: where(s),
        measured: `${f(s.goodputFraction)} (${k(s.goodput)}/s of ${k(l.capacity.rate)}/s)`,
        met: s.goodputFraction >= TARGETS.goodput,
      })
    }
    for (const s of l.steps) {
      const none = !Number.isFinite(s.refusalP99)
      rows.push({
        target: `refusal (503) p99 <= ${TARGETS.refusalP99Ms} ms`,
        layout: l.layout,
        where: where(s),
        measured: none ? 'no 503s' : `${f(s.refusalP99, 1)} ms (answers p99 ${f(s.okP99, 1)} ms)`,
        met: none ? undefined : s.refusalP99 <= TARGETS.refusalP99Ms,
      })
    }
    const all = windows(l)
    if (all.length > 0) {
      const missing = all.reduce((a, s) => a + noAnswer(s), 0)
      const sent = all.reduce((a, s) => a + s.sent, 0)
      rows.push({
        target: 'no request without an answer',
        layout: l.layout,
        where: `every step (${k(sent)} requests)`,
        measured: `${k(missing)} without an answer`,
        met: missing === 0,
      })
    }
    if (l.tenants) {
      const q = l.tenants.quiet
      rows.push({
        target: `quiet tenant >= ${TARGETS.quiet} of offered on time`,
        layout: l.layout,
        where: `${l.tenants.flood.label} + ${q.label}, ${deadlineLabel(q)}`,
        measured: `${f(q.goodShare)} (${k(q.goodShare * q.sent)} of ${k(q.sent)})`,
        met: q.goodShare >= TARGETS.quiet,
      })
    }
    rows.push(refusalCpuRow(l))
    for (const s of l.steps) {
      const b = busyFraction(s, l.capacity, l.workerProc)
      const refused = s.sent - answers(s) > 0
      rows.push({
        target: `worker busy >= ${TARGETS.busy} while refusing`,
        layout: l.layout,
        where: where(s),
        measured: l.workerProc === undefined ? 'n/a (one process)' : `${f(b)}${refused ? '' : ' (no refusals)'}`,
        met: l.workerProc === undefined || !refused ? undefined : b >= TARGETS.busy,
      })
    }
  }
  return rows
}

/** The CPU-per-refusal target: the refusal phase's CPU per 503 over the CPU per answer at capacity (and beside it, per open-loop answer). */
export function refusalCpuRow(l: LayoutResult): LayoutTargetRow {
  const target = `${l.gatewayProc} CPU per refusal <= ${TARGETS.refusalCpu} x per answer`
  const p = l.refusalPhase
  if (!p) {
    return { target, layout: l.layout, where: 'refusal phase', measured: 'not run', met: undefined }
  }
  const perAnswer = cpuPerAnswerUs(l.capacity, l.gatewayProc)
  const raw = cpuPerRefusalUs(p, l.gatewayProc)
  const open = l.answerPhase ? cpuPerOpenAnswerUs(l.answerPhase, l.gatewayProc) : Number.NaN
  // Net of the phase's admitted requests at the open-loop answer's CPU; the raw figure without an answer phase.
  const r = Number.isFinite(open) ? cpuPerRefusalUs(p, l.gatewayProc, open) : raw
  const others = p.sent - refusals(p)
  return {
    target,
    layout: l.layout,
    where: `refusal phase (${k(p.rate)}/s, ${deadlineLabel(p)}; 503 ${f(refusals(p) / p.sent)} of ${k(p.sent)}, ${k(others)} others at ${k(open)} us each) vs answers at capacity`,
    measured: Number.isFinite(r)
      ? `${k(r)} us net (${k(raw)} us with the others) vs ${k(perAnswer)} us (${f(r / perAnswer)}); vs ${k(open)} us per open-loop answer (${f(r / open)})`
      : 'no refusals',
    met: Number.isFinite(r) && r > 0 ? r <= TARGETS.refusalCpu * perAnswer : undefined,
  }
}

/** The target table with met / MISSED. */
export function layoutTargetTable(rows: LayoutTargetRow[]): string {
  return table(
    ['target', 'layout', 'where', 'measured', 'result'],
    rows.map((r) => [r.target, r.layout, r.where, r.measured, r.met === undefined ? 'n/a' : r.met ? 'met' : 'MISSED']),
  )
}

/** One layout's steps: goodput, latencies of answers beside refusals, CPU per answer/refusal, busy, logs. */
export function layoutStepTable(l: LayoutResult): string {
  const perAnswer = cpuPerAnswerUs(l.capacity, l.gatewayProc)
  // The tenants share one window (both generators at once): their CPU columns are the window's.
  const phases = [l.answerPhase, l.refusalPhase].filter((s): s is LayoutStep => s !== undefined)
  const rows = [...[...l.steps, ...phases].map((s) => ({ s, own: true })), ...(l.tenants ? [l.tenants.flood, l.tenants.quiet].map((s) => ({ s, own: false })) : [])]
  const cap = l.capacity
  return table(
    [
      'step',
      'deadline',
      'offered/s',
      'sent',
      'goodput/cap',
      'good/sent',
      'ok p50/p99 ms',
      '503 p50/p99 ms',
      'by status',
      'no answer',
      `${l.gatewayProc} us/request`,
      'worker busy',
      'log lines (bytes)',
      'CPU s/s',
    ],
    [
      [
        `capacity (wrk)`,
        'none',
        k(cap.rate),
        k(cap.answers + cap.non2xx),
        '1.00',
        '',
        `- / ${f(cap.p99Ms, 1)}`,
        '',
        `200:${cap.answers}${cap.non2xx ? ` non-2xx:${cap.non2xx}` : ''}`,
        '',
        `${k(perAnswer)} (per answer)`,
        '1.00',
        `${cap.logLines} (${k(cap.logBytes)})`,
        cpuText(cap),
      ],
      ...rows.map(({ s, own }) => [
        s.label,
        deadlineLabel(s),
        k(s.rate),
        String(s.sent),
        f(s.goodputFraction),
        f(s.goodShare),
        `${f(s.okP50, 1)} / ${f(s.okP99, 1)}`,
        `${f(s.refusalP50, 1)} / ${f(s.refusalP99, 1)}`,
        Object.entries(s.byStatus)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([c, n]) => `${c}:${n}`)
          .join(' '),
        String(noAnswer(s)),
        own ? k(cpuPerRequestUs(s, l.gatewayProc)) : '(both tenants)',
        f(busyFraction(s, cap, l.workerProc)),
        `${s.logLines} (${k(s.logBytes)})`,
        cpuText(s),
      ]),
    ],
  )
}

function cpuText(m: Metered): string {
  return Object.entries(m.cpuS)
    .map(([p, c]) => `${p} ${f(c / m.wallS)}`)
    .join(', ')
}

/** Every measured window of a layout with its label: the steps, the phases, the two tenants. */
function windows(l: LayoutResult): LayoutStep[] {
  const phases = [l.answerPhase, l.refusalPhase].filter((s): s is LayoutStep => s !== undefined)
  return [...l.steps, ...phases, ...(l.tenants ? [l.tenants.flood, l.tenants.quiet] : [])]
}

/** Latency p50/p99 per step by outcome (200 / 503 / 504 / ... / no answer), then by the error body's code. */
export function layoutOutcomeTable(l: LayoutResult): string {
  const cell = (o: { n: number; p50Ms: number; p99Ms: number }) => `${k(o.n)}: ${f(o.p50Ms, 1)} / ${f(o.p99Ms, 1)}`
  const rows = windows(l).map((s) => {
    const outcomes = Object.entries(s.byOutcome)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([o, v]) => `${o} ${cell(v)}`)
    const codes = Object.entries(s.byCode)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([c, v]) => `${c} ${cell(v)}`)
    return [s.label, deadlineLabel(s), outcomes.join('; '), codes.join('; ') || '-']
  })
  return table(['step', 'deadline', 'by outcome: n: p50 / p99 ms', 'non-200 by body code: n: p50 / p99 ms'], rows)
}
