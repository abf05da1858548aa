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
  /** The error body's `code` of each non-200 answer ('' where none: 200s, no answer, a body without one); absent: none read. */
  errorCode?: string[]
  /** How long the client waited for each request, answered or not (a timeout's wait is the client's timeout), ms; absent: `latencyMs`. */
  waitedMs?: number[]
  /** The schedule's length, s. */
  durationS: number
}

/** How many requests had one outcome, and their latency at the client (ms; for `no answer`, how long the client waited). */
export interface OutcomeLatency {
  n: number
  p50Ms: number
  p99Ms: number
}

/** The outcome of a status: `200`, `503`, `504`, another status as its number, or `no answer` (timeout, socket error, never sent). */
export function outcomeOf(status: number): string {
  return status <= 0 ? 'no answer' : String(status)
}

/** Latency by outcome (`200`, `503`, `504`, ..., `no answer`) and by the error body's `code` of non-200 answers (`(none)` without one). */
export function latencyByOutcome(r: StepRecords): { byOutcome: Record<string, OutcomeLatency>; byCode: Record<string, OutcomeLatency> } {
  const outcome = new Map<string, number[]>()
  const code = new Map<string, number[]>()
  const push = (m: Map<string, number[]>, k: string, v: number) => {
    const a = m.get(k) ?? []
    a.push(v)
    m.set(k, a)
  }
  for (let i = 0; i < r.status.length; i++) {
    const s = r.status[i] as number
    const waited = r.waitedMs?.[i] ?? r.latencyMs[i] ?? Number.NaN
    push(outcome, outcomeOf(s), waited)
    if (s > 0 && s !== 200) {
      push(code, r.errorCode?.[i] || '(none)', waited)
    }
  }
  const summary = (m: Map<string, number[]>) =>
    Object.fromEntries([...m].map(([k, v]) => [k, { n: v.length, p50Ms: percentile(v.filter(Number.isFinite), 50), p99Ms: percentile(v.filter(Number.isFinite), 99) }]))
  return { byOutcome: summary(outcome), byCode: summary(code) }
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
  /** Refusal latency: 503s only (the door's and the worker's refusals); 504s and other statuses are in `byOutcome`. */
  refusalP50: number
  refusalP99: number
  /** Latency p50/p99 and count by outcome: `200`, `503`, `504`, any other status, `no answer`. */
  byOutcome: Record<string, OutcomeLatency>
  /** The same by the error body's `code` of non-200 answers (`OVERLOADED`, `DEADLINE_EXCEEDED`, ...; `(none)` without one). */
  byCode: Record<string, OutcomeLatency>
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
    } else if (s === 503) {
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
    ...latencyByOutcome(r),
  }
}

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : n === Number.POSITIVE_INFINITY ? 'inf' : 'n/a')

/** `client 250 ms` or `no deadline (SLO 1000 ms)`. */
export function deadlineLabel(s: Pick<OverloadStep, 'clientDeadlineMs' | 'budgetMs'>): string {
  return s.clientDeadlineMs !== undefined ? `client ${f(s.clientDeadlineMs, 0)} ms` : `no deadline (SLO ${f(s.budgetMs, 0)} ms)`
}
