import { table } from './report.ts'
import { percentile } from './stats.ts'

/**
 * The arithmetic of `cohort bench overload` (docs/benchmarks.md#overload): per-request records of
 * one open-loop step turned into goodput, latencies of answers and of refusals, counts by status
 * and the wait past each request's deadline; then issue 14's targets as a table. Pure: no I/O.
 * @module
 */

/** The gateway waits this long past a request's deadline for the worker's reply (`REPLY_GRACE_MS`, apps/gateway/src/door.ts). */
export const REPLY_GRACE_MS = 50

/** Per-request records of one step (a subset of poisson.ts `LoadRecords`; same index in every array). */
export interface StepRecords {
  /** Scheduled send time, ms from the step's start. */
  scheduledMs: number[]
  /** Scheduled send to the end of the response, ms (NaN: no answer). */
  latencyMs: number[]
  /** HTTP status; 0 = no answer before the drain ended, -1 = socket error. */
  status: number[]
  /** Actual send minus scheduled send, ms (generator lag); absent: 0. */
  lagMs?: number[]
  /** The `request()` call until the client's agent gave it a socket, ms (NaN: never got one); absent: 0. */
  queuedMs?: number[]
  /** The schedule's length, s. */
  durationS: number
}

/** What one step was. */
export interface StepSpec {
  /** e.g. `2x`, `burst 10x`, `flood 3x`. */
  label: string
  /** Offered rate as a multiple of capacity. */
  multiple: number
  /** Offered rate, requests/s. */
  rate: number
  /** The client deadline sent as `x-cohort-timeout-ms`; undefined: none sent. */
  clientDeadlineMs: number | undefined
  /** The server-side SLO the model's workers announced before the step (ms; NaN: none). */
  sloMs: number
  /** Closed-loop capacity, requests/s, that goodput is a fraction of. */
  capacity: number
}

/** One measured step. Latencies in ms (at the client, from the scheduled send), rates per second. */
export interface OverloadStep {
  label: string
  multiple: number
  rate: number
  durationS: number
  clientDeadlineMs: number | undefined
  /** The deadline each request is judged against: the client's, else the server SLO. */
  budgetMs: number
  sent: number
  /**
   * Answers by status (`200`, `503`, `504`, `429`, ...; `socket` = socket error; `lost` = sent, no
   * answer before the drain ended; `unsent` = never left the client: every one of its sockets was
   * waiting for an answer until the drain ended).
   */
  byStatus: Record<string, number>
  /** 200s within the budget that completed inside the step's window, per second. */
  goodput: number
  /** goodput / capacity. */
  goodputFraction: number
  /** 200s within the budget / sent (any completion time). */
  goodShare: number
  /** Admitted (200) latency. */
  okP50: number
  okP99: number
  /** Refusal latency: answers with any status other than 200 (503, 504, 429, 4xx). */
  refusalP50: number
  refusalP99: number
  /**
   * Longest wait past the budget of any answered request, from the scheduled send, and from the
   * actual send (generator lag and the wait for a client socket taken off); <= 0: none late.
   */
  overMaxMs: number
  overFromSendMaxMs: number
  /** Answers (any status) later than budget + REPLY_GRACE_MS from the actual send. */
  pastGrace: number
  /** Generator lag p99 and max, ms. */
  lagP99Ms: number
  lagMaxMs: number
  /** p99 of the wait for a client socket (of the requests that got one), ms. */
  socketWaitP99Ms: number
  /** Mean latency of every answer (any status), ms: compare with the gateway's own mean. */
  meanAnsweredMs: number
}

function statusKey(s: number): string {
  return s === 0 ? 'lost' : s < 0 ? 'socket' : String(s)
}

/**
 * Summarise one step. Goodput counts the 200s answered within the budget whose answer came inside
 * the step's window `[0, durationS]` (scheduled send + latency), per second of the window: a
 * completion rate, comparable with the closed-loop capacity, that does not credit the step with
 * the queue it drains after its schedule ends.
 */
export function summariseOverloadStep(spec: StepSpec, r: StepRecords): OverloadStep {
  const budget = spec.clientDeadlineMs ?? spec.sloMs
  const byStatus: Record<string, number> = {}
  const ok: number[] = []
  const refused: number[] = []
  const lag: number[] = []
  const socketWait: number[] = []
  let goodInWindow = 0
  let good = 0
  let overMax = Number.NEGATIVE_INFINITY
  let overSendMax = Number.NEGATIVE_INFINITY
  let pastGrace = 0
  let answered = 0
  let answeredSum = 0
  const windowMs = r.durationS * 1000
  for (let i = 0; i < r.status.length; i++) {
    const s = r.status[i] as number
    const l = r.latencyMs[i] as number
    const q = r.queuedMs ? (r.queuedMs[i] as number) : 0
    const lg = (r.lagMs?.[i] ?? 0) + (Number.isNaN(q) ? 0 : q)
    lag.push(r.lagMs?.[i] ?? 0)
    if (!Number.isNaN(q)) {
      socketWait.push(q)
    }
    const key = s === 0 && Number.isNaN(q) ? 'unsent' : statusKey(s)
    byStatus[key] = (byStatus[key] ?? 0) + 1
    if (s === 0) {
      continue
    }
    answered++
    answeredSum += l
    overMax = Math.max(overMax, l - budget)
    overSendMax = Math.max(overSendMax, l - lg - budget)
    pastGrace += l - lg > budget + REPLY_GRACE_MS ? 1 : 0
    if (s === 200) {
      ok.push(l)
      if (l <= budget) {
        good++
        goodInWindow += (r.scheduledMs[i] as number) + l <= windowMs ? 1 : 0
      }
    } else if (s > 0) {
      refused.push(l)
    }
  }
  const n = r.status.length
  const goodput = r.durationS > 0 ? goodInWindow / r.durationS : Number.NaN
  return {
    label: spec.label,
    multiple: spec.multiple,
    rate: spec.rate,
    durationS: r.durationS,
    clientDeadlineMs: spec.clientDeadlineMs,
    budgetMs: budget,
    sent: n,
    byStatus,
    goodput,
    goodputFraction: goodput / spec.capacity,
    goodShare: n > 0 ? good / n : Number.NaN,
    okP50: percentile(ok, 50),
    okP99: percentile(ok, 99),
    refusalP50: percentile(refused, 50),
    refusalP99: percentile(refused, 99),
    overMaxMs: overMax === Number.NEGATIVE_INFINITY ? Number.NaN : overMax,
    overFromSendMaxMs: overSendMax === Number.NEGATIVE_INFINITY ? Number.NaN : overSendMax,
    pastGrace,
    lagP99Ms: percentile(lag, 99),
    lagMaxMs: lag.length ? Math.max(...lag) : Number.NaN,
    socketWaitP99Ms: percentile(socketWait, 99),
    meanAnsweredMs: answered > 0 ? answeredSum / answered : Number.NaN,
  }
}

/** CPU seconds each process used per second of a step (/proc), e.g. `{gateway: 0.93, worker: 0.71}`. */
export type CpuShare = Record<string, number>

/**
 * A step with the CPU each process spent during it (all threads), and how long each process's
 * main thread (its event loop) waited on a run queue for a core: where the time went on a
 * shared machine.
 */
export type MeasuredStep = OverloadStep & {
  cpu: CpuShare
  runqueueWait: CpuShare
  /** Mean time a request spent in the gateway's handler (its `cohort_request_duration_seconds`), ms. */
  gatewayMeanMs: number
}

/** The two-tenant flood: one API key at a multiple of capacity, the other at a fraction. */
export interface TenantFlood {
  flood: MeasuredStep
  quiet: MeasuredStep
}

/**
 * Each tenant's share of the good answers (200s within its deadline) beside its fair share. The
 * fair share is max-min fairness over what was served well (equal weights): the tenant that sent
 * fewer than half of the good answers gets all it sent, the other the rest (never more than it
 * sent). Good answers, not all 200s: when requests queue before any check (a saturated gateway)
 * every request may end in a late 200, and shares of late answers say nothing about fairness.
 */
export interface TenantShares {
  /** 200s of each tenant (any latency). */
  floodOk: number
  quietOk: number
  /** 200s within the deadline of each tenant. */
  floodGood: number
  quietGood: number
  /** Measured shares of the good answers (sum 1; NaN when none). */
  floodShare: number
  quietShare: number
  /** Fair shares of the same good answers (max-min, equal weights). */
  floodFair: number
  quietFair: number
  /** The quiet tenant's good answers / what it sent. */
  quietGoodShare: number
}

/** {@link TenantShares} of a two-tenant flood. */
export function tenantShares(t: Pick<TenantFlood, 'flood' | 'quiet'>): TenantShares {
  const good = (s: OverloadStep) => (s.sent > 0 && Number.isFinite(s.goodShare) ? Math.round(s.goodShare * s.sent) : 0)
  const floodGood = good(t.flood)
  const quietGood = good(t.quiet)
  const served = floodGood + quietGood
  // Max-min fair split of `served` between demands `flood.sent` and `quiet.sent`.
  const quietIsSmall = t.quiet.sent <= t.flood.sent
  const smallFair = Math.min(Math.min(t.flood.sent, t.quiet.sent), served / 2)
  const bigFair = Math.min(Math.max(t.flood.sent, t.quiet.sent), served - smallFair)
  const total = smallFair + bigFair
  return {
    floodOk: t.flood.byStatus['200'] ?? 0,
    quietOk: t.quiet.byStatus['200'] ?? 0,
    floodGood,
    quietGood,
    floodShare: served > 0 ? floodGood / served : Number.NaN,
    quietShare: served > 0 ? quietGood / served : Number.NaN,
    floodFair: total > 0 ? (quietIsSmall ? bigFair : smallFair) / total : Number.NaN,
    quietFair: total > 0 ? (quietIsSmall ? smallFair : bigFair) / total : Number.NaN,
    quietGoodShare: t.quiet.goodShare,
  }
}

/** The two-tenant flood again, with several worker and gateway processes (`--tenants-multi`). */
export interface MultiTenantFlood extends TenantFlood {
  workers: number
  gateways: number
  /** Closed-loop capacity of this layout (one wrk per gateway at once, summed), 200s/s. */
  capacity: number
  capacityRuns: number[]
  /** Inference requests each worker received during the flood (`$SRV.STATS` `num_requests`), by worker id; NaN where unread. */
  perWorker: Record<string, number>
}

/** Everything measured for one model. */
export interface ModelOverload {
  model: string
  /** How the model runs, e.g. `heavy MLP 512->2560x3->16, 1 ORT thread`. */
  describe: string
  /** Closed-loop capacity (wrk -c<connections>): 200s per second. */
  capacity: number
  /** The closed-loop runs whose median is `capacity`, 200s/s. */
  capacityRuns: number[]
  /** The same closed-loop run after every step: how far the machine drifted during the run. */
  capacityAfter: number
  capacityNon2xx: number
  /** wrk's socket errors (connect, read, write, timeouts past 10 s) in the median capacity run. */
  capacitySocketErrors: number
  capacityP99Ms: number
  /** Whether the model's cost is sleep-based (the refusal target is 5 ms there, 20 ms for CPU-bound models). */
  sleepBased: boolean
  /** Whether the issue's goodput targets name this model (the model-bound one). */
  modelBound: boolean
  steps: MeasuredStep[]
  tenants: TenantFlood | undefined
  /** The same flood with several workers and gateways; undefined: not run. */
  tenantsMulti?: MultiTenantFlood | undefined
  errors: string[]
}

/** One row of the target table. */
export interface TargetRow {
  target: string
  model: string
  where: string
  measured: string
  /** undefined: nothing to judge (no refusal happened at all). */
  met: boolean | undefined
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : n === Number.POSITIVE_INFINITY ? 'inf' : 'n/a')
const k = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')

/** `client 250 ms` or `no deadline (SLO 1000 ms)`. */
export function deadlineLabel(s: Pick<OverloadStep, 'clientDeadlineMs' | 'budgetMs'>): string {
  return s.clientDeadlineMs !== undefined ? `client ${f(s.clientDeadlineMs, 0)} ms` : `no deadline (SLO ${f(s.budgetMs, 0)} ms)`
}

/**
 * Issue 14's targets, one row per model and step they name: goodput >= 0.9 x capacity and
 * admitted p99 within the budget at 1.5x, 2x, 4x (with and without client deadlines); refusal p99
 * at 4x <= 20 ms (CPU-bound) or 5 ms (sleep-based); the quiet tenant's goodput >= 0.9 of what it
 * offered; and no request waiting past its deadline plus the reply grace (over every step of the
 * model, generator lag taken off), with none lost.
 */
export function overloadTargets(models: ModelOverload[]): TargetRow[] {
  const rows: TargetRow[] = []
  for (const m of models) {
    const steady = m.steps.filter((s) => [1.5, 2, 4].includes(s.multiple) && !s.label.startsWith('burst'))
    for (const s of steady) {
      rows.push({
        target: 'goodput >= 0.9 x capacity (goal 0.97)',
        model: m.model,
        where: `${s.label}, ${deadlineLabel(s)}`,
        measured: `${f(s.goodputFraction)} (${k(s.goodput)}/s of ${k(m.capacity)}/s)`,
        met: s.goodputFraction >= 0.9,
      })
    }
    for (const s of steady) {
      rows.push({
        target: 'admitted p99 within the deadline/SLO',
        model: m.model,
        where: `${s.label}, ${deadlineLabel(s)}`,
        measured: `${f(s.okP99, 1)} ms vs ${f(s.budgetMs, 0)} ms`,
        met: s.okP99 <= s.budgetMs,
      })
    }
    const limit = m.sleepBased ? 5 : 20
    for (const s of steady.filter((x) => x.multiple === 4)) {
      const none = !Number.isFinite(s.refusalP99)
      rows.push({
        target: `refusal p99 <= ${limit} ms at 4x (${m.sleepBased ? 'sleep-based' : 'CPU-bound'})`,
        model: m.model,
        where: `${s.label}, ${deadlineLabel(s)}`,
        measured: none ? 'no refusals' : `${f(s.refusalP99, 1)} ms (answers p99 ${f(s.okP99, 1)} ms)`,
        met: none ? undefined : s.refusalP99 <= limit,
      })
    }
    if (m.tenants) {
      const q = m.tenants.quiet
      rows.push({
        target: "quiet tenant's goodput >= 0.9 of offered",
        model: m.model,
        where: `${m.tenants.flood.label} + ${q.label}, ${deadlineLabel(q)}`,
        measured: `${f(q.goodShare)} (${k(q.goodShare * q.sent)} of ${k(q.sent)})`,
        met: q.goodShare >= 0.9,
      })
    }
    const mt = m.tenantsMulti
    if (mt) {
      const q = mt.quiet
      rows.push({
        target: "quiet tenant's goodput >= 0.9 of offered",
        model: m.model,
        where: `${mt.flood.label} + ${q.label}, ${deadlineLabel(q)}, ${layoutLabel(mt)}`,
        measured: `${f(q.goodShare)} (${k(q.goodShare * q.sent)} of ${k(q.sent)})`,
        met: q.goodShare >= 0.9,
      })
    }
    const all = [...m.steps, ...(m.tenants ? [m.tenants.flood, m.tenants.quiet] : []), ...(mt ? [mt.flood, mt.quiet] : [])]
    if (all.length > 0) {
      const over = Math.max(...all.map((s) => (Number.isFinite(s.overFromSendMaxMs) ? s.overFromSendMaxMs : Number.NEGATIVE_INFINITY)))
      const lost = all.reduce((a, s) => a + (s.byStatus['lost'] ?? 0), 0)
      const unsent = all.reduce((a, s) => a + (s.byStatus['unsent'] ?? 0), 0)
      const past = all.reduce((a, s) => a + s.pastGrace, 0)
      const sent = all.reduce((a, s) => a + s.sent, 0)
      const worst = all.find((s) => s.overFromSendMaxMs === over)
      rows.push({
        target: `no wait past deadline + ${REPLY_GRACE_MS} ms grace`,
        model: m.model,
        where: `every step (${k(sent)} requests)`,
        measured: `max ${over > 0 ? '+' : ''}${f(over, 1)} ms${worst ? ` (${worst.label}, ${deadlineLabel(worst)})` : ''}; ${past} past grace, ${lost} lost${unsent ? `, ${unsent} never sent (client sockets all waiting)` : ''}`,
        met: !(over > REPLY_GRACE_MS) && lost === 0 && unsent === 0 && past === 0,
      })
    }
  }
  return rows
}

/** The per-step table of one model: rates, goodput, latencies of answers and refusals, counts. */
export function stepTable(m: ModelOverload): string {
  const rows = [...m.steps, ...(m.tenants ? [m.tenants.flood, m.tenants.quiet] : []), ...(m.tenantsMulti ? [m.tenantsMulti.flood, m.tenantsMulti.quiet] : [])]
  return table(
    ['step', 'deadline', 'offered/s', 'sent', 'goodput/cap', 'good/sent', 'ok p50/p99', 'refusal p50/p99', 'by status', 'over max (send)', 'gen lag p99/max', 'socket wait p99', 'mean client/gateway ms', 'CPU s/s (main thread runqueue wait s/s)'],
    rows.map((s) => [
      s.label,
      deadlineLabel(s),
      k(s.sent / s.durationS),
      String(s.sent),
      f(s.goodputFraction),
      f(s.goodShare),
      `${f(s.okP50, 1)} / ${f(s.okP99, 1)}`,
      `${f(s.refusalP50, 1)} / ${f(s.refusalP99, 1)}`,
      Object.entries(s.byStatus).sort(([a], [b]) => a.localeCompare(b)).map(([c, n]) => `${c}:${n}`).join(' '),
      `${f(s.overMaxMs, 0)} (${f(s.overFromSendMaxMs, 0)})`,
      `${f(s.lagP99Ms, 1)} / ${f(s.lagMaxMs, 1)}`,
      f(s.socketWaitP99Ms, 1),
      `${f(s.meanAnsweredMs, 0)} / ${f(s.gatewayMeanMs, 0)}`,
      Object.entries(s.cpu).map(([p, c]) => `${p} ${f(c)} (${f(s.runqueueWait[p] ?? Number.NaN)})`).join(', '),
    ]),
  )
}

/** `2 workers, 2 gateways`. */
export function layoutLabel(l: { workers: number; gateways: number }): string {
  return `${l.workers} worker${l.workers === 1 ? '' : 's'}, ${l.gateways} gateway${l.gateways === 1 ? '' : 's'}`
}

/**
 * The two-tenant flood in each layout side by side: capacity, what each tenant sent, its 200s and
 * good answers, its share of the good answers beside its fair share, and the quiet tenant's goodput.
 */
export function tenantShareTable(m: ModelOverload): string {
  const layouts: { label: string; capacity: number; t: TenantFlood }[] = []
  if (m.tenants) {
    layouts.push({ label: layoutLabel({ workers: 1, gateways: 1 }), capacity: m.capacity, t: m.tenants })
  }
  if (m.tenantsMulti) {
    layouts.push({ label: layoutLabel(m.tenantsMulti), capacity: m.tenantsMulti.capacity, t: m.tenantsMulti })
  }
  return table(
    ['layout', 'capacity/s', 'sent flood / quiet', '200s flood / quiet', 'good flood / quiet', 'flood share (fair)', 'quiet share (fair)', 'quiet good/sent', 'requests per worker'],
    layouts.map(({ label, capacity, t }) => {
      const s = tenantShares(t)
      const pw = 'perWorker' in t ? Object.values((t as MultiTenantFlood).perWorker).map((n) => k(n)).join(' / ') : ''
      return [
        label,
        k(capacity),
        `${k(t.flood.sent)} / ${k(t.quiet.sent)}`,
        `${k(s.floodOk)} / ${k(s.quietOk)}`,
        `${k(s.floodGood)} / ${k(s.quietGood)}`,
        `${f(s.floodShare, 3)} (${f(s.floodFair, 3)})`,
        `${f(s.quietShare, 3)} (${f(s.quietFair, 3)})`,
        f(s.quietGoodShare),
        pw,
      ]
    }),
  )
}

/** The target table: each target with its measured value and met/missed. */
export function targetTable(rows: TargetRow[]): string {
  return table(
    ['target', 'model', 'where', 'measured', 'result'],
    rows.map((r) => [r.target, r.model, r.where, r.measured, r.met === undefined ? 'n/a' : r.met ? 'met' : 'MISSED']),
  )
}
