// The door's admission controller on a fake clock, through the worker-wait check it steers: the
// margin (predicted finish within (1 - margin) of what is left), the outcome feedback (late
// outcomes admit less, once per window; on-time outcomes restore it) and per-tenant state (a quiet
// tenant is judged by its own outcomes, not a flooding tenant's).
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
  // One worker: 60 ms of queued work and 10 ms to run the batch (70 ms predicted), no itemMs (the burst does not grow it).
  const beat = () => waits.heartbeat('w1', 1000, { m: { queued: 6, waitMs: 60, serviceMs: 10 } })
  beat()
  expect(check.judge('m', 'nobody', 50).admit).toBe(true) // the model's probe: later verdicts are the estimate's
  return { clock, waits, check, beat }
}

const admitted = (v: ReturnType<WorkerWaitCheck['judge']>) => v.admit && v.probe !== true

describe('admission with a margin', () => {
  it('the default margin is 20%: 70 ms predicted is refused with 80 ms left (70 > 64) and admitted with 90 ms (70 <= 72)', () => {
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

  it('margin 0 admits up to the edge of the deadline (what the door did before)', () => {
    const { check } = setup({ margin: 0 })
    expect(admitted(check.judge('m', '', 70))).toBe(true)
    expect(check.judge('m', '', 69).admit).toBe(false)
  })
})

describe('feedback: admitted requests that finish late mean admit less', () => {
  it('a late outcome cuts the fraction by `decrease` (80% -> 56%): 70 ms predicted no longer fits 100 ms left; on-time outcomes add it back', () => {
    const { check, clock, beat } = setup()
    const v = check.judge('m', '', 100)
    expect(admitted(v)).toBe(true)
    if (!v.admit) throw new Error('admitted')
    clock.advance(120) // it finished past its deadline
    check.control.outcome(v.ticket!, true)
    beat()
    expect(check.control.fraction('m', '')).toBeCloseTo(0.56)
    expect(check.judge('m', '', 100).admit).toBe(false) // 70 > 56
    expect(admitted(check.judge('m', '', 130))).toBe(true) // 70 <= 72.8
    // Additive increase: 12 on-time outcomes of 2% bring it from 56% back to 80%.
    const t = check.control.ticket('m', '')
    for (let i = 0; i < 12; i++) check.control.outcome(t, false)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.8)
    expect(admitted(check.judge('m', '', 90))).toBe(true)
    for (let i = 0; i < 20; i++) check.control.outcome(t, false)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.8) // never above 1 - margin
  })

  it('a window of late outcomes counts once (TCP-style): ten requests admitted together and all late cut the fraction once, not ten times', () => {
    const { check } = setup()
    const tickets = Array.from({ length: 10 }, () => check.judge('m', '', 1000)).map((v) => (v.admit ? v.ticket! : undefined))
    expect(tickets.every((t) => t !== undefined)).toBe(true)
    for (const t of tickets) check.control.outcome(t!, true)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.56)
    // One admitted after the cut and late again: a second cut.
    const next = check.judge('m', '', 1000)
    if (!next.admit) throw new Error('admitted')
    check.control.outcome(next.ticket!, true)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.392)
  })

  it('a state without a late outcome for resetAfterMs (10 s) is forgotten: a cut during a spike does not hold back later traffic', () => {
    const { check, clock } = setup()
    check.control.outcome(check.control.ticket('m', ''), true)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.56)
    clock.advance(9_000)
    check.control.outcome(check.control.ticket('m', ''), true) // late again: the 10 s start over
    expect(check.control.fraction('m', '')).toBeCloseTo(0.392)
    clock.advance(9_999)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.392)
    clock.advance(2)
    expect(check.control.fraction('m', '')).toBeCloseTo(0.8)
  })

  it('never below the floor: a long run of late outcomes keeps admitting what fits 10% of the budget', () => {
    const ctl = new AdmissionControl()
    for (let i = 0; i < 50; i++) ctl.outcome(ctl.ticket('m', ''), true)
    expect(ctl.fraction('m', '')).toBeCloseTo(0.1)
    expect(ctl.admit('m', '', 10, 100)).toBeDefined()
    expect(ctl.admit('m', '', 11, 100)).toBeUndefined()
  })
})

describe('per tenant', () => {
  it("a flooding tenant's late outcomes cut its own fraction only: the quiet tenant is admitted on its own state", () => {
    const { check } = setup()
    for (let i = 0; i < 5; i++) check.control.outcome(check.control.ticket('m', 'key:flood'), true)
    expect(check.control.fraction('m', 'key:flood')).toBeLessThan(0.2)
    expect(check.judge('m', 'key:flood', 100).admit).toBe(false)
    expect(admitted(check.judge('m', 'key:quiet', 100))).toBe(true)
    expect(check.control.fraction('m', 'key:quiet')).toBeCloseTo(0.8)
  })

  it('rejects invalid options', () => {
    expect(() => new AdmissionControl({ margin: 1 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ decrease: 1 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ increase: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ resetAfterMs: 0 })).toThrow(RangeError)
  })
})
