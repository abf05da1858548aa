// The overload benchmark's arithmetic: goodput, refusal and answer percentiles, waits past the
// deadline, tenant shares against their fair shares, and issue 14's target table.
import { describe, expect, it } from 'vitest'
import {
  overloadTargets,
  tenantShares,
  tenantShareTable,
  REPLY_GRACE_MS,
  summariseOverloadStep,
  targetTable,
  type MeasuredStep,
  type ModelOverload,
  type MultiTenantFlood,
  type StepRecords,
  type StepSpec,
} from './overload-stats.ts'

const spec = (o: Partial<StepSpec> = {}): StepSpec => ({ label: '2x', multiple: 2, rate: 200, clientDeadlineMs: 100, sloMs: 1000, capacity: 10, ...o })

/** Records from [scheduledMs, latencyMs, status, lagMs?] rows. */
const recs = (rows: [number, number, number, number?][], durationS = 1): StepRecords => ({
  scheduledMs: rows.map((r) => r[0]),
  latencyMs: rows.map((r) => r[1]),
  status: rows.map((r) => r[2]),
  lagMs: rows.map((r) => r[3] ?? 0),
  durationS,
})

describe('summariseOverloadStep', () => {
  it('counts as goodput only 200s within the deadline whose answer came inside the window, per second, as a fraction of capacity', () => {
    const s = summariseOverloadStep(
      spec(),
      recs([
        [0, 50, 200], // good
        [100, 100, 200], // good: exactly at the deadline
        [200, 101, 200], // late
        [300, 10, 503], // refused
        [950, 60, 200], // within the deadline but answered after the 1 s window
      ]),
    )
    expect(s.budgetMs).toBe(100)
    expect(s.goodput).toBe(2)
    expect(s.goodputFraction).toBe(0.2)
    // good/sent counts the late-in-window answer: 3 of 5 were 200s within 100 ms.
    expect(s.goodShare).toBeCloseTo(3 / 5)
  })

  it('judges requests without a client deadline against the server SLO', () => {
    const s = summariseOverloadStep(spec({ clientDeadlineMs: undefined, sloMs: 1000 }), recs([[0, 400, 200], [10, 1200, 200]], 2))
    expect(s.budgetMs).toBe(1000)
    expect(s.goodput).toBe(0.5)
    expect(s.overMaxMs).toBe(200)
  })

  it('reports refusal latency (every non-200 answer) apart from answer latency, and counts by status', () => {
    const rows: [number, number, number][] = []
    for (let i = 0; i < 100; i++) {
      rows.push([i, 10 + i, 200]) // answers 10..109 ms
      rows.push([i, 1 + i / 10, i % 2 ? 503 : 504]) // refusals 1..10.9 ms
    }
    rows.push([0, 500, 429], [0, Number.NaN, 0], [0, 3, -1])
    const s = summariseOverloadStep(spec({ clientDeadlineMs: 1000 }), recs(rows))
    expect(s.byStatus).toEqual({ '200': 100, '503': 50, '504': 50, '429': 1, lost: 1, socket: 1 })
    expect(s.okP50).toBe(59)
    expect(s.okP99).toBe(108)
    // 101 refusals: 100 from 1 to 10.9 ms and the 500 ms 429 (nearest rank: the 51st and the 100th);
    // socket errors and lost requests are not refusals.
    expect(s.refusalP50).toBeCloseTo(6)
    expect(s.refusalP99).toBeCloseTo(10.9)
  })

  it('measures the wait past the deadline from the scheduled send and, generator lag taken off, from the actual send', () => {
    const s = summariseOverloadStep(
      spec(),
      recs([
        [0, 100 + REPLY_GRACE_MS + 30, 504, 40], // 80 ms late as scheduled, 40 ms from its send: within the grace
        [5, 100 + REPLY_GRACE_MS + 20, 200, 0], // 70 ms late: past the grace
        [9, Number.NaN, 0], // lost: not an answer, counted by status
      ]),
    )
    expect(s.overMaxMs).toBe(REPLY_GRACE_MS + 30)
    expect(s.overFromSendMaxMs).toBe(REPLY_GRACE_MS + 20)
    expect(s.pastGrace).toBe(1)
    expect(s.byStatus['lost']).toBe(1)
    expect(s.lagMaxMs).toBe(40)
    expect(s.meanAnsweredMs).toBe((2 * 100 + 2 * REPLY_GRACE_MS + 50) / 2)
  })

  it('takes the wait for a client socket off the wait past the deadline, and tells requests that never got a socket from lost ones', () => {
    const r = recs([
      [0, 300, 504, 10],
      [1, Number.NaN, 0],
      [2, Number.NaN, 0],
    ])
    r.queuedMs = [140, 5, Number.NaN]
    const s = summariseOverloadStep(spec(), r)
    // 300 ms at the client, 10 ms of generator lag, 140 ms waiting for a socket: 150 ms from the send, 50 past the 100 ms deadline.
    expect(s.overMaxMs).toBe(200)
    expect(s.overFromSendMaxMs).toBe(50)
    expect(s.pastGrace).toBe(0)
    expect(s.byStatus).toEqual({ '504': 1, lost: 1, unsent: 1 })
    expect(s.socketWaitP99Ms).toBe(140)
  })
})

const step = (label: string, multiple: number, o: Partial<MeasuredStep> = {}): MeasuredStep => ({
  ...summariseOverloadStep(spec({ label, multiple }), recs([[0, 10, 200]])),
  goodputFraction: 0.95,
  okP99: 80,
  refusalP99: 3,
  overFromSendMaxMs: -20,
  pastGrace: 0,
  byStatus: { '200': 1 },
  cpu: {},
  runqueueWait: {},
  gatewayMeanMs: 1,
  ...o,
})

const model = (o: Partial<ModelOverload> = {}): ModelOverload => ({
  model: 'heavy',
  describe: '',
  capacity: 10,
  capacityRuns: [10],
  capacityAfter: 10,
  capacityNon2xx: 0,
  capacitySocketErrors: 0,
  capacityP99Ms: 1,
  sleepBased: false,
  modelBound: true,
  steps: [step('1.5x', 1.5), step('2x', 2), step('4x', 4), step('burst 10x', 10)],
  tenants: { flood: step('tenant A 3x', 3), quiet: step('tenant B 15%', 0.15, { goodShare: 0.95, sent: 20 }) },
  errors: [],
  ...o,
})

describe('overloadTargets', () => {
  it('lists every target per step with met when each value is within its bound', () => {
    const rows = overloadTargets([model()])
    expect(rows.map((r) => r.target)).toEqual([
      ...Array(3).fill('goodput >= 0.9 x capacity (goal 0.97)'),
      ...Array(3).fill('admitted p99 within the deadline/SLO'),
      'refusal p99 <= 20 ms at 4x (CPU-bound)',
      "quiet tenant's goodput >= 0.9 of offered",
      `no wait past deadline + ${REPLY_GRACE_MS} ms grace`,
    ])
    expect(rows.every((r) => r.met)).toBe(true)
    // The burst is not a goodput step.
    expect(rows.some((r) => r.where.startsWith('burst'))).toBe(false)
  })

  it('marks each miss: goodput under 0.9, admitted p99 over the deadline, slow refusals, a starved quiet tenant', () => {
    const rows = overloadTargets([
      model({
        steps: [step('1.5x', 1.5, { goodputFraction: 0.89 }), step('2x', 2, { okP99: 101 }), step('4x', 4, { refusalP99: 21 })],
        tenants: { flood: step('tenant A 3x', 3), quiet: step('tenant B 15%', 0.15, { goodShare: 0.5, sent: 20 }) },
      }),
    ])
    const missed = rows.filter((r) => !r.met).map((r) => `${r.target} @ ${r.where}`)
    expect(missed).toEqual([
      'goodput >= 0.9 x capacity (goal 0.97) @ 1.5x, client 100 ms',
      'admitted p99 within the deadline/SLO @ 2x, client 100 ms',
      'refusal p99 <= 20 ms at 4x (CPU-bound) @ 4x, client 100 ms',
      "quiet tenant's goodput >= 0.9 of offered @ tenant A 3x + tenant B 15%, client 100 ms",
    ])
    expect(targetTable(rows)).toContain('MISSED')
  })

  it('holds a sleep-based model to 5 ms refusals', () => {
    const rows = overloadTargets([model({ model: 'affine', sleepBased: true, steps: [step('4x', 4, { refusalP99: 6 })] })])
    const r = rows.find((x) => x.target.startsWith('refusal'))
    expect(r?.target).toBe('refusal p99 <= 5 ms at 4x (sleep-based)')
    expect(r?.met).toBe(false)
    const none = overloadTargets([model({ steps: [step('4x', 4, { refusalP99: Number.NaN })] })]).find((x) => x.target.startsWith('refusal'))
    expect(none?.met).toBeUndefined()
    expect(targetTable([none!])).toContain('n/a')
  })

  it('misses the no-late-wait target on a wait past the grace, or on any request left without an answer', () => {
    const late = overloadTargets([model({ steps: [step('burst 10x', 10, { overFromSendMaxMs: REPLY_GRACE_MS + 1, pastGrace: 1 })] })])
    expect(late.find((r) => r.target.startsWith('no wait'))?.met).toBe(false)
    expect(late.find((r) => r.target.startsWith('no wait'))?.measured).toContain(`max +${REPLY_GRACE_MS + 1}.0 ms (burst 10x`)
    const lost = overloadTargets([model({ steps: [step('2x', 2, { byStatus: { '200': 5, lost: 1 } })] })])
    expect(lost.find((r) => r.target.startsWith('no wait'))?.met).toBe(false)
    expect(lost.find((r) => r.target.startsWith('no wait'))?.measured).toContain('1 lost')
    const unsent = overloadTargets([model({ steps: [step('2x', 2, { byStatus: { '200': 5, unsent: 2 } })] })]).find((r) => r.target.startsWith('no wait'))
    expect(unsent?.met).toBe(false)
    expect(unsent?.measured).toContain('2 never sent')
  })
})

describe("tenantShares (each tenant's share of the good answers beside its max-min fair share)", () => {
  const flood = (sent: number, ok: number, good: number) => step('tenant A 3x', 3, { sent, goodShare: good / sent, byStatus: { '200': ok, '503': sent - ok } })
  const quiet = (sent: number, ok: number, good: number) => step('tenant B 15%', 0.15, { sent, goodShare: good / sent, byStatus: { '200': ok, '503': sent - ok } })

  it('gives the tenant that sent fewer than half of the good answers all it sent, the flood the rest', () => {
    // 900 good answers; the quiet tenant sent 50 (< 450): fair = 50 / 900 for it, 850 / 900 for the flood.
    const s = tenantShares({ flood: flood(3000, 1200, 860), quiet: quiet(50, 45, 40) })
    expect([s.floodOk, s.quietOk, s.floodGood, s.quietGood]).toEqual([1200, 45, 860, 40])
    expect(s.quietShare).toBeCloseTo(40 / 900)
    expect(s.floodShare).toBeCloseTo(860 / 900)
    expect(s.quietFair).toBeCloseTo(50 / 900)
    expect(s.floodFair).toBeCloseTo(850 / 900)
    expect(s.quietGoodShare).toBeCloseTo(0.8)
  })

  it('counts only 200s within the deadline: late 200s are not a share of service', () => {
    // Every request answered 200, most of them late: the shares follow the good ones.
    const s = tenantShares({ flood: flood(1000, 1000, 600), quiet: quiet(100, 100, 0) })
    expect(s.quietShare).toBe(0)
    expect(s.quietFair).toBeCloseTo(100 / 600)
  })

  it('splits the good answers in half when both tenants sent more than half of them', () => {
    const s = tenantShares({ flood: flood(3000, 800, 700), quiet: quiet(1000, 400, 300) })
    expect(s.quietFair).toBeCloseTo(0.5)
    expect(s.floodFair).toBeCloseTo(0.5)
    expect(s.quietShare).toBeCloseTo(0.3)
  })

  it('is NaN, not a share, when nothing was served in time', () => {
    const s = tenantShares({ flood: flood(10, 10, 0), quiet: quiet(5, 5, 0) })
    expect(s.quietShare).toBeNaN()
    expect(s.quietFair).toBeNaN()
  })

  it('prints the layouts side by side and adds the quiet-tenant target for the multi layout', () => {
    const multi: MultiTenantFlood = { workers: 2, gateways: 2, capacity: 20, capacityRuns: [20], perWorker: { w1: 300, w2: 310 }, flood: flood(3000, 1200, 860), quiet: quiet(50, 45, 40) }
    const m = model({ model: 'affine', sleepBased: true, tenantsMulti: multi })
    const t = tenantShareTable(m)
    expect(t).toContain('1 worker, 1 gateway')
    expect(t).toContain('2 workers, 2 gateways')
    expect(t).toContain('0.044 (0.056)') // the quiet tenant's share (fair share)
    expect(t).toContain('860 / 40')
    expect(t).toContain('300 / 310')
    const rows = overloadTargets([m]).filter((r) => r.target.startsWith("quiet tenant's"))
    expect(rows.map((r) => [r.where.endsWith('2 workers, 2 gateways'), r.met])).toEqual([
      [false, true],
      [true, false],
    ])
  })
})
