import { table } from './report.ts'
import { deadlineLabel, type OverloadStep } from './overload-stats.ts'

/**
 * The arithmetic of `cohort bench overload` per layout (issue 27): gateway CPU per answer and per
 * refusal from /proc deltas, the worker's busy fraction, requests with no answer, log lines, and
 * the issue's targets as a table. Pure: no I/O.
 *
 * CPU per refusal is attributed, not measured alone: the closed-loop capacity run answers every
 * request 200, so its gateway CPU over its answers is the CPU of one answer (A); in an overload
 * step the gateway's CPU minus A x its 200s, over the requests not answered 200 (refused, timed
 * out, or never answered), is the CPU of one refusal. It assumes an answer costs the same at
 * capacity as under overload (batches are as full in both).
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

/**
 * CPU µs of `proc` per request not answered 200 in a step: its CPU minus `perAnswerUs` for each
 * 200, over the rest (NaN when every request was answered 200).
 */
export function cpuPerRefusalUs(s: LayoutStep, proc: string, perAnswerUs: number): number {
  const refused = s.sent - answers(s)
  return refused > 0 ? ((s.cpuS[proc] ?? Number.NaN) * 1e6 - perAnswerUs * answers(s)) / refused : Number.NaN
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
        target: `refusal p99 <= ${TARGETS.refusalP99Ms} ms`,
        layout: l.layout,
        where: where(s),
        measured: none ? 'no refusals' : `${f(s.refusalP99, 1)} ms (answers p99 ${f(s.okP99, 1)} ms)`,
        met: none ? undefined : s.refusalP99 <= TARGETS.refusalP99Ms,
      })
    }
    const all = [...l.steps, ...(l.tenants ? [l.tenants.flood, l.tenants.quiet] : [])]
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
    const perAnswer = cpuPerAnswerUs(l.capacity, l.gatewayProc)
    for (const s of l.steps) {
      const r = cpuPerRefusalUs(s, l.gatewayProc, perAnswer)
      rows.push({
        target: `${l.gatewayProc} CPU per refusal <= ${TARGETS.refusalCpu} x per answer`,
        layout: l.layout,
        where: where(s),
        measured: Number.isFinite(r) ? `${k(r)} us vs ${k(perAnswer)} us (${f(r / perAnswer)})` : 'no refusals',
        met: Number.isFinite(r) ? r <= TARGETS.refusalCpu * perAnswer : undefined,
      })
    }
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
  const rows = [...l.steps.map((s) => ({ s, own: true })), ...(l.tenants ? [l.tenants.flood, l.tenants.quiet].map((s) => ({ s, own: false })) : [])]
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
      'refusal p50/p99 ms',
      'by status',
      'no answer',
      `${l.gatewayProc} us/answer | /refusal`,
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
        `${k(perAnswer)} | -`,
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
        own ? `${k(perAnswer)} | ${k(cpuPerRefusalUs(s, l.gatewayProc, perAnswer))}` : '(both tenants)',
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
