// The overload benchmark's per-step arithmetic: goodput, refusal and answer percentiles, waits past
// the deadline (the per-layout targets: overload-layout.test.ts).
import { describe, expect, it } from 'vitest'
import { REPLY_GRACE_MS, summariseOverloadStep, type StepRecords, type StepSpec } from './overload-stats.ts'

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
    const s = summariseOverloadStep(
      spec({ clientDeadlineMs: undefined, sloMs: 1000 }),
      recs(
        [
          [0, 400, 200],
          [10, 1200, 200],
        ],
        2,
      ),
    )
    expect(s.budgetMs).toBe(1000)
    expect(s.goodput).toBe(0.5)
    expect(s.overMaxMs).toBe(200)
  })

  it('reports refusal latency (503s only) apart from answer latency, latency by outcome, and counts by status', () => {
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
    // 50 refusals (the odd i: 1.1, 1.3, ..., 10.9 ms); 504s, the 429, socket errors and lost requests are not refusals.
    expect(s.refusalP50).toBeCloseTo(5.9)
    expect(s.refusalP99).toBeCloseTo(10.9)
    expect(s.byOutcome['504']).toMatchObject({ n: 50, p99Ms: 10.8 })
    expect(s.byOutcome['429']).toEqual({ n: 1, p50Ms: 500, p99Ms: 500 })
    expect(s.byOutcome['no answer']?.n).toBe(2)
    expect(s.byCode).toEqual({ '(none)': expect.objectContaining({ n: 101 }) })
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
