// The door's admission controller on a fake clock, through the worker-wait check it steers: the
// margin (predicted finish within (1 - margin) of what is left), its growth on late outcomes (a
// quarter of the way to 0.8, once per window), its decay by the clock (half-life 2 s) to the floor
// (20%), the good-queue exemption (a wait within two batch runs) and per-tenant state.
import { describe, expect, it } from 'vitest'
import { FakeClock } from '@cohort/batching'
import { AdmissionControl, DEFAULT_ADMISSION_MARGIN, type AdmissionControlOptions } from './admission-control.ts'
import { WorkerWaitCheck } from './wait-check.ts'
import { WorkerWaits } from './wait-table.ts'

function setup(control: AdmissionControlOptions = {}) {
  const clock = new FakeClock(1_000_000)
  const waits = new WorkerWaits(() => clock.now())
  // A long probe interval: every verdict below is the estimate's, not a probe's.
  const check = new WorkerWaitCheck(waits, { probeIntervalMs: 60_000, control })
  // One worker: 60 ms of queued work and 10 ms to run the batch (70 ms predicted; a standing queue of 6 runs), no itemMs.
  const beat = () => waits.heartbeat('w1', 1000, { m: { queued: 6, waitMs: 60, serviceMs: 10 } })
  beat()
  expect(check.judge('m', 'nobody', 50).admit).toBe(true) // the model's probe: later verdicts are the estimate's
  return { clock, waits, check, beat }
}

const admitted = (v: ReturnType<WorkerWaitCheck['judge']>) => v.admit && v.probe !== true
const late = (ctl: AdmissionControl, tenant = '') => ctl.outcome(ctl.ticket('m', tenant, 100), true)

describe('admission with a margin', () => {
  it('the floor is 20%: 70 ms predicted is refused with 80 ms left (70 > 64) and admitted with 90 ms (70 <= 72)', () => {
    expect(DEFAULT_ADMISSION_MARGIN).toBe(0.2)
    const { check } = setup()
    const refused = check.judge('m', '', 80)
    expect(refused.admit).toBe(false)
    if (!refused.admit) {
      expect(refused.error.code).toBe('OVERLOADED')
      expect(refused.error.message).toMatch(/admission fills at most 80%/)
    }
    expect(admitted(check.judge('m', '', 90))).toBe(true)
  })

  it("the gateway's own delay counts in the predicted finish: 70 ms + 10 ms of delay does not fit 90 ms left at 20%", () => {
    const { check } = setup()
    expect(admitted(check.judge('m', '', 90, 0))).toBe(true)
    expect(check.judge('m', '', 90, 10).admit).toBe(false)
  })

  it('a good queue (wait within two batch runs) is exempt from the margin: 20 ms wait + 10 ms run is admitted with 30 ms left, 21 ms wait is not', () => {
    const ctl = new AdmissionControl()
    for (let i = 0; i < 3; i++) late(ctl) // windowMs 100 on the real clock: one raise
    expect(ctl.margin('m', '')).toBeGreaterThan(0.3)
    expect(ctl.admit('m', '', 20, 10, 0, 30)).toBeDefined() // 2 runs: good queue, 30 <= 30
    expect(ctl.admit('m', '', 21, 10, 0, 31)).toBeUndefined() // a standing queue: the margin applies
    expect(ctl.admit('m', '', 0, 40, 0, 40)).toBeDefined() // an idle worker is never locked out
  })
})

describe('feedback: late finishes grow the margin, the clock brings it back', () => {
  it('a late outcome moves the margin a quarter of the way to 0.8 (0.2 -> 0.35 -> 0.4625), at most once per 100 ms window', () => {
    const { check, clock, beat } = setup()
    const ctl = check.control
    late(ctl)
    expect(ctl.margin('m', '')).toBeCloseTo(0.35)
    late(ctl) // same window: no second raise
    clock.advance(99)
    late(ctl)
    expect(ctl.margin('m', '')).toBeCloseTo(0.2 + 0.15 * 0.5 ** (99 / 2000))
    clock.advance(1)
    const m = ctl.margin('m', '')
    late(ctl)
    expect(ctl.margin('m', '')).toBeCloseTo(m + (0.8 - m) / 4)
    // 70 ms predicted now needs 70 / (1 - 0.46) = 130 ms left (a fresh estimate: the queue has not drained).
    beat()
    expect(check.judge('m', '', 120).admit).toBe(false)
    expect(admitted(check.judge('m', '', 140))).toBe(true)
  })

  it('late means past 80% of the budget: an answer at 79 ms of 100 is on time, at 81 ms late; a 504 or worker refusal is late whenever it comes', () => {
    const { check, clock } = setup()
    const ctl = check.control
    const t = ctl.ticket('m', '', 100)
    clock.advance(79)
    ctl.outcome(t, false)
    expect(ctl.margin('m', '')).toBe(0.2)
    clock.advance(2)
    ctl.outcome(t, false)
    expect(ctl.margin('m', '')).toBeCloseTo(0.35)
    clock.advance(100)
    ctl.outcome(ctl.ticket('m', '', 1000), true) // failed at once
    expect(ctl.margin('m', '')).toBeGreaterThan(0.4)
  })

  it('the margin decays by the clock with a half-life of 2 s, down to the floor and no lower', () => {
    const { check, clock } = setup()
    const ctl = check.control
    late(ctl)
    expect(ctl.margin('m', '')).toBeCloseTo(0.35)
    clock.advance(2000)
    expect(ctl.margin('m', '')).toBeCloseTo(0.275)
    clock.advance(2000)
    expect(ctl.margin('m', '')).toBeCloseTo(0.2375)
    clock.advance(60_000)
    expect(ctl.margin('m', '')).toBe(0.2)
    expect(admitted(check.judge('m', '', 90))).toBe(true)
  })

  it('the margin never passes maxMargin (0.8): fifty late windows leave it at most 0.8, and a good queue still gets through', () => {
    const clock = new FakeClock(0)
    const ctl = new AdmissionControl({ now: () => clock.now() })
    for (let i = 0; i < 50; i++) {
      late(ctl)
      clock.advance(100)
    }
    expect(ctl.margin('m', '')).toBeLessThanOrEqual(0.8)
    expect(ctl.margin('m', '')).toBeGreaterThan(0.7) // raises of a quarter against 100 ms of decay each
    expect(ctl.admit('m', '', 10, 40, 0, 60)).toBeDefined()
  })
})

describe('per tenant', () => {
  it("a flooding tenant's late outcomes grow its own margin only: the quiet tenant is admitted on its own state", () => {
    const { check, clock, beat } = setup()
    for (let i = 0; i < 5; i++) {
      late(check.control, 'key:flood')
      clock.advance(100)
    }
    beat()
    expect(check.control.margin('m', 'key:flood')).toBeGreaterThan(0.6)
    expect(check.judge('m', 'key:flood', 100).admit).toBe(false)
    expect(admitted(check.judge('m', 'key:quiet', 100))).toBe(true)
    expect(check.control.margin('m', 'key:quiet')).toBe(0.2)
  })

  it('rejects invalid options', () => {
    expect(() => new AdmissionControl({ margin: -0.1 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ margin: 0.5, maxMargin: 0.4 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ step: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ halfLifeMs: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ lateFraction: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ goodQueueRuns: -1 })).toThrow(RangeError)
  })
})
