// `cohort bench overload`'s per-layout arithmetic (issue 27): vegeta's results read into step
// records (no answer told apart from refusals, the error body's code read), gateway CPU per answer
// and per refusal measured in phases of their own from /proc deltas, the worker's busy fraction, and the target table's met / MISSED / n/a.
import { describe, expect, it } from 'vitest'
import { summariseOverloadStep, type StepSpec } from './overload-stats.ts'
import {
  busyFraction,
  cpuPerAnswerUs,
  cpuPerOpenAnswerUs,
  cpuPerRefusalUs,
  layoutOutcomeTable,
  layoutStepTable,
  layoutTargets,
  layoutTargetTable,
  noAnswer,
  type CapacityRun,
  type LayoutResult,
  type LayoutStep,
  type Metered,
} from './overload-layout-stats.ts'
import { bodyErrorCode, parseVegetaJson, vegetaRecords, writeVegetaTargets } from './vegeta.ts'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const line = (o: { ts: string; code: number; latencyNs: number; error?: string; body?: unknown }) =>
  JSON.stringify({
    attack: '',
    seq: 0,
    code: o.code,
    timestamp: o.ts,
    latency: o.latencyNs,
    bytes_out: 1,
    bytes_in: 1,
    error: o.error ?? '',
    body: o.body === undefined ? null : Buffer.from(JSON.stringify(o.body)).toString('base64'),
    method: 'POST',
    url: 'http://x/',
    headers: null,
  })

describe('vegeta results', () => {
  it('parses `vegeta encode --to json`, keeping sub-millisecond send times, sorted by send time', () => {
    const text = [
      line({ ts: '2026-12-02T03:49:14.322543159Z', code: 503, latencyNs: 2_500_000 }),
      line({ ts: '2026-12-02T03:49:13.822143733Z', code: 200, latencyNs: 1_558_774 }),
      '',
    ].join('\n')
    const hits = parseVegetaJson(text)
    expect(hits.map((h) => h.code)).toEqual([200, 503])
    expect(hits[1]!.atMs - hits[0]!.atMs).toBeCloseTo(500.399426, 3)
    expect(hits[0]!.latencyMs).toBeCloseTo(1.558774, 6)
  })

  it('turns a client timeout into "no answer" (0) and a connection error into a socket error (-1), both without latency', () => {
    const hits = parseVegetaJson(
      [
        line({ ts: '2026-12-02T00:00:00Z', code: 200, latencyNs: 5e6 }),
        line({ ts: '2026-12-02T00:00:00.1Z', code: 503, latencyNs: 1e6, error: '503 Service Unavailable' }),
        line({ ts: '2026-12-02T00:00:00.2Z', code: 0, latencyNs: 10e9, error: 'Post "http://x/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)' }),
        line({ ts: '2026-12-02T00:00:00.3Z', code: 0, latencyNs: 1e5, error: 'Post "http://x/": dial tcp: connect: connection refused' }),
      ].join('\n'),
    )
    const r = vegetaRecords(hits, 1)
    expect(r.status).toEqual([200, 503, 0, -1])
    expect(r.scheduledMs.map((x) => Math.round(x))).toEqual([0, 100, 200, 300])
    expect(r.latencyMs.slice(0, 2)).toEqual([5, 1])
    expect(r.latencyMs.slice(2).every(Number.isNaN)).toBe(true)
    const s = summariseOverloadStep({ label: '2x', multiple: 2, rate: 8, clientDeadlineMs: 250, sloMs: 1000, capacity: 1 }, r)
    expect(s.byStatus).toEqual({ '200': 1, '503': 1, lost: 1, socket: 1 })
    expect(noAnswer(s)).toBe(2)
  })

  it("reads the error body's code of non-200 answers ({ code } or { error: { code } }), and none of 200s or no answer", () => {
    const hits = parseVegetaJson(
      [
        line({ ts: '2026-12-02T00:00:00Z', code: 200, latencyNs: 5e6, body: { code: 'IGNORED' } }),
        line({
          ts: '2026-12-02T00:00:00.1Z',
          code: 503,
          latencyNs: 1e6,
          body: { code: 'OVERLOADED', error: 'no worker can finish it; refused at the door (worker-wait check), retry' },
        }),
        line({ ts: '2026-12-02T00:00:00.2Z', code: 504, latencyNs: 2e8, body: { error: { code: 'DEADLINE_EXCEEDED', message: 'late' } } }),
        line({ ts: '2026-12-02T00:00:00.3Z', code: 502, latencyNs: 1e6, body: 'not json' }),
        line({ ts: '2026-12-02T00:00:00.4Z', code: 0, latencyNs: 10e9, error: 'context deadline exceeded' }),
      ].join('\n'),
    )
    expect(hits.map((h) => h.errorCode)).toEqual(['', 'OVERLOADED worker_wait', 'DEADLINE_EXCEEDED', '', ''])
    const s = summariseOverloadStep({ label: '2x', multiple: 2, rate: 5, clientDeadlineMs: 250, sloMs: 1000, capacity: 1 }, vegetaRecords(hits, 1))
    expect(Object.keys(s.byCode).sort()).toEqual(['(none)', 'DEADLINE_EXCEEDED', 'OVERLOADED worker_wait'])
    expect(s.byCode['DEADLINE_EXCEEDED']).toEqual({ n: 1, p50Ms: 200, p99Ms: 200 })
    // No answer: how long the client waited (its timeout).
    expect(s.byOutcome['no answer']).toEqual({ n: 1, p50Ms: 10_000, p99Ms: 10_000 })
    expect(s.refusalP99).toBe(1)
  })

  it('tells a refusal by the step that refused it, from its message', () => {
    const body = (error: unknown) => Buffer.from(JSON.stringify({ code: 'OVERLOADED', error })).toString('base64')
    expect(bodyErrorCode(503, body('the request waited 300 ms before the gateway could judge it, not less than its 250 ms budget (arrival-wait check)'))).toBe(
      'OVERLOADED arrival_wait',
    )
    expect(bodyErrorCode(503, body("the gateway is saturated: requests wait about 900 ms before they are read, not less than this request's 250 ms budget"))).toBe(
      'OVERLOADED event_loop_lag',
    )
    expect(bodyErrorCode(503, body('the gateway is at its in-flight bound: 64 requests; retry later'))).toBe('OVERLOADED inflight')
    expect(bodyErrorCode(503, body({ code: 'OVERLOADED', message: 'model "m" queue is full (4096 items)' }))).toBe('OVERLOADED worker')
    expect(bodyErrorCode(400, Buffer.from(JSON.stringify({ code: 'DEADLINE_TOO_SHORT', error: 'x' })).toString('base64'))).toBe('DEADLINE_TOO_SHORT')
  })

  it("writes a targets file in vegeta's HTTP format: the request line, headers, then @body", () => {
    const dir = mkdtempSync(join(tmpdir(), 'vegeta-test-'))
    const path = writeVegetaTargets(dir, 't', 'http://127.0.0.1:1/v2/models/m/infer', '{"inputs":[]}', { 'X-Cohort-Timeout-Ms': '250' })
    const lines = readFileSync(path, 'utf8').split('\n')
    expect(lines.slice(0, 3)).toEqual(['POST http://127.0.0.1:1/v2/models/m/infer', 'Content-Type: application/json', 'X-Cohort-Timeout-Ms: 250'])
    expect(lines[3]).toMatch(/^@.*t\.body\.json$/)
    expect(readFileSync(lines[3]!.slice(1), 'utf8')).toBe('{"inputs":[]}')
  })
})

const metered = (cpuS: Record<string, number>, wallS = 1): Metered => ({ wallS, cpuS, logLines: 0, logBytes: 0 })
const capacity = (o: Partial<CapacityRun> = {}): CapacityRun => ({ rate: 100, answers: 100, non2xx: 0, p99Ms: 50, ...metered({ gateway: 0.1, worker: 0.8 }), ...o })

/** A step of `sent` requests: `ok` answered 200 within 250 ms, the rest refused 503 after `refusalMs`. */
function step(o: { label?: string; deadline?: number; sent: number; ok: number; refusalMs?: number; lost?: number; cpuS: Record<string, number>; capacity?: number }): LayoutStep {
  const status: number[] = []
  const latencyMs: number[] = []
  const scheduledMs: number[] = []
  for (let i = 0; i < o.sent; i++) {
    const lost = i >= o.sent - (o.lost ?? 0)
    const answered = i < o.ok
    status.push(lost ? 0 : answered ? 200 : 503)
    latencyMs.push(lost ? Number.NaN : answered ? 100 : (o.refusalMs ?? 2))
    scheduledMs.push((i * 800) / o.sent)
  }
  const spec: StepSpec = { label: o.label ?? '2x', multiple: 2, rate: o.sent, clientDeadlineMs: o.deadline ?? 250, sloMs: 1000, capacity: o.capacity ?? 100 }
  return { ...summariseOverloadStep(spec, { status, latencyMs, scheduledMs, durationS: 1 }), ...metered(o.cpuS) }
}

describe('CPU per answer and per refusal, busy fraction', () => {
  it('measures CPU per refusal in the refusal phase (its CPU over its 503s) and per answer at capacity and in the answer phase', () => {
    const cap = capacity({ answers: 1000, cpuS: { gateway: 0.8, worker: 0.9 } })
    expect(cpuPerAnswerUs(cap, 'gateway')).toBeCloseTo(800)
    // 1000 sent, 990 refused 503, 10 answered 200: the phase's 0.099 s over the 990 refusals.
    const p = step({ sent: 1000, ok: 10, deadline: 2, cpuS: { gateway: 0.099 } })
    expect(cpuPerRefusalUs(p, 'gateway')).toBeCloseTo(100)
    // Net of the 10 others at 900 us each: (0.099 s - 0.009 s) / 990.
    expect(cpuPerRefusalUs(p, 'gateway', 900)).toBeCloseTo(90.909, 2)
    expect(cpuPerRefusalUs(step({ sent: 10, ok: 10, cpuS: { gateway: 0.1 } }), 'gateway'), 'no refusals').toBeNaN()
    expect(cpuPerOpenAnswerUs(step({ sent: 100, ok: 100, cpuS: { gateway: 0.1 } }), 'gateway')).toBeCloseTo(1000)
  })

  it('gives the busy fraction as the worker CPU s/s of the step over the same at capacity, NaN without a worker process', () => {
    expect(busyFraction(metered({ worker: 1.8 }, 2), metered({ worker: 1 }, 1), 'worker')).toBeCloseTo(0.9)
    expect(busyFraction(metered({ serve: 1 }), metered({ serve: 1 }), undefined)).toBeNaN()
  })
})

function layout(o: Partial<LayoutResult> = {}): LayoutResult {
  return {
    layout: 'shared',
    describe: 'test',
    gatewayProc: 'gateway',
    workerProc: 'worker',
    t1Ms: 10,
    pathMs: 1,
    ceiling: 400,
    capacity: capacity({ answers: 100, cpuS: { gateway: 0.1, worker: 0.8 } }),
    steps: [],
    tenants: undefined,
    refusalPhase: undefined,
    answerPhase: undefined,
    errors: [],
    ...o,
  }
}

describe('layoutTargets', () => {
  it('meets every target when goodput, refusal latency, quiet tenant, refusal CPU and busy are inside their bounds', () => {
    // Capacity 100/s; the step answers 90 of 180 in time (goodput 0.9), refusals at 10 ms,
    // refusal CPU 0.1 of an answer's (1 ms per answer), worker at 0.76 s/s vs 0.8 (0.95).
    const good = step({ sent: 180, ok: 90, refusalMs: 10, cpuS: { gateway: 0.09 + 0.009, worker: 0.76 } })
    const quiet = step({ label: 'tenant B 15%', sent: 15, ok: 15, cpuS: { gateway: 0.1, worker: 0.76 } })
    // Refusal phase: 1000 refused at 100 us each against 1 ms per answer at capacity (0.1).
    const refusalPhase = step({ label: 'refusals 4x', deadline: 2, sent: 1000, ok: 0, cpuS: { gateway: 0.1, worker: 0.1 } })
    const rows = layoutTargets([layout({ steps: [good], tenants: { flood: good, quiet }, refusalPhase })])
    expect(rows.map((r) => [r.target.split(' ')[0], r.met])).toEqual([
      ['goodput', true],
      ['refusal', true],
      ['no', true],
      ['quiet', true],
      ['gateway', true],
      ['worker', true],
    ])
    expect(layoutTargetTable(rows)).not.toContain('MISSED')
  })

  it('misses each target past its bound, counts requests without an answer, and judges nothing where nothing happened', () => {
    const bad = step({ sent: 200, ok: 50, refusalMs: 80, lost: 3, cpuS: { gateway: 0.05 + 0.147 * 0.5, worker: 0.4 } })
    const none = step({ sent: 50, ok: 50, deadline: undefined, cpuS: { gateway: 0.05, worker: 0.4 } })
    const quiet = step({ label: 'tenant B 15%', sent: 20, ok: 10, cpuS: {} })
    const refusalPhase = step({ label: 'refusals 4x', deadline: 2, sent: 100, ok: 0, cpuS: { gateway: 0.05 } })
    const rows = layoutTargets([layout({ steps: [bad, none], tenants: { flood: bad, quiet }, refusalPhase })])
    const by = (t: string) => rows.filter((r) => r.target.startsWith(t)).map((r) => r.met)
    expect(by('goodput')).toEqual([false, false])
    expect(by('refusal (503) p99')).toEqual([false, undefined])
    expect(rows.find((r) => r.target.startsWith('no request'))).toMatchObject({ met: false, measured: '6 without an answer' })
    expect(by('quiet')).toEqual([false])
    expect(by('gateway CPU')).toEqual([false])
    expect(layoutTargets([layout({ steps: [none] })]).find((r) => r.target.startsWith('gateway CPU'))).toMatchObject({ met: undefined, measured: 'not run' })
    expect(by('worker busy')).toEqual([false, undefined])
    expect(layoutTargetTable(rows)).toContain('MISSED')
  })

  it("judges cohort serve's process as the gateway and leaves the busy fraction to layouts with a worker process", () => {
    const s = step({ sent: 180, ok: 90, refusalMs: 10, cpuS: { serve: 0.9 } })
    const refusalPhase = step({ label: 'refusals 4x', deadline: 2, sent: 100, ok: 0, cpuS: { serve: 0.2 } })
    const rows = layoutTargets([layout({ layout: 'serve', gatewayProc: 'serve', workerProc: undefined, capacity: capacity({ cpuS: { serve: 0.5 } }), steps: [s], refusalPhase })])
    expect(rows.find((r) => r.target.startsWith('serve CPU'))?.met).toBe(false)
    expect(rows.find((r) => r.target.startsWith('worker busy'))).toMatchObject({ met: undefined, measured: 'n/a (one process)' })
    expect(layoutStepTable(layout({ layout: 'serve', gatewayProc: 'serve', workerProc: undefined, steps: [s] }))).toContain('serve us/request')
  })

  it('tabulates latency by outcome and by error code for every step and phase', () => {
    const t = layoutOutcomeTable(
      layout({ steps: [step({ sent: 10, ok: 5, refusalMs: 3, cpuS: {} })], refusalPhase: step({ label: 'refusals 4x', deadline: 2, sent: 4, ok: 0, cpuS: {} }) }),
    )
    expect(t).toContain('200 5: 100.0 / 100.0; 503 5: 3.0 / 3.0')
    expect(t).toContain('refusals 4x')
  })
})
