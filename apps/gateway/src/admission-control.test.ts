// The door's admission controller on a fake clock, through the worker-wait check it steers: the
// margin (predicted finish within (1 - margin) of what is left), the outcome feedback (late
// outcomes scale the queued wait up, once per window; on-time outcomes take it back; a quiet spell
// forgets it; an idle worker is never locked out) and per-tenant state (a quiet tenant is judged
// by its own outcomes, not a flooding tenant's).
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
      expect(refused.error.message).toMatch(/admission fills at most 80%, counting queued work x1\.00/)
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
  it('a late outcome scales the queued wait by 1/0.7: 60 ms counts 85.7, so 95.7 ms predicted no longer fits 100 ms left (80); on-time outcomes take it back', () => {
    const { check, clock, beat } = setup()
    const v = check.judge('m', '', 100)
    expect(admitted(v)).toBe(true)
    if (!v.admit) throw new Error('admitted')
    clock.advance(120) // it finished past its deadline
    check.control.outcome(v.ticket!, true)
    beat()
    expect(check.control.scale('m', '')).toBeCloseTo(1 / 0.7)
    const refused = check.judge('m', '', 100)
    expect(refused.admit).toBe(false) // 95.7 > 80
    if (!refused.admit) expect(refused.error.message).toMatch(/counting queued work x1\.43/)
    expect(admitted(check.judge('m', '', 120))).toBe(true) // 95.7 <= 96
    // Additive: 9 on-time outcomes of 0.05 bring the scale from 1.43 back to 1.
    const t = check.control.ticket('m', '')
    for (let i = 0; i < 9; i++) check.control.outcome(t, false)
    expect(check.control.scale('m', '')).toBe(1)
    expect(admitted(check.judge('m', '', 90))).toBe(true)
  })

  it('a window of late outcomes counts once (TCP-style): ten requests admitted together and all late raise the scale once, not ten times', () => {
    const { check } = setup()
    const tickets = Array.from({ length: 10 }, () => check.judge('m', '', 1000)).map((v) => (v.admit ? v.ticket! : undefined))
    expect(tickets.every((t) => t !== undefined)).toBe(true)
    for (const t of tickets) check.control.outcome(t!, true)
    expect(check.control.scale('m', '')).toBeCloseTo(1 / 0.7)
    // One admitted after the raise and late again: a second raise.
    const next = check.judge('m', '', 1000)
    if (!next.admit) throw new Error('admitted')
    check.control.outcome(next.ticket!, true)
    expect(check.control.scale('m', '')).toBeCloseTo(1 / 0.49)
  })

  it('a state without a late outcome for resetAfterMs (10 s) is forgotten: a correction made during a spike does not hold back later traffic', () => {
    const { check, clock } = setup()
    check.control.outcome(check.control.ticket('m', ''), true)
    clock.advance(9_000)
    check.control.outcome(check.control.ticket('m', ''), true) // late again: the 10 s start over
    expect(check.control.scale('m', '')).toBeCloseTo(1 / 0.49)
    clock.advance(9_999)
    expect(check.control.scale('m', '')).toBeCloseTo(1 / 0.49)
    clock.advance(2)
    expect(check.control.scale('m', '')).toBe(1)
  })

  it('never a lockout: at the largest scale (10) a request to an idle worker (no queued wait) is still admitted when its run fits', () => {
    const ctl = new AdmissionControl()
    for (let i = 0; i < 50; i++) ctl.outcome(ctl.ticket('m', ''), true)
    expect(ctl.scale('m', '')).toBe(10)
    expect(ctl.admit('m', '', 0, 40, 100)).toBeDefined() // 40 <= 80
    expect(ctl.admit('m', '', 5, 40, 100)).toBeUndefined() // 50 + 40 > 80
  })
})

describe('per tenant', () => {
  it("a flooding tenant's late outcomes raise its own scale only: the quiet tenant is admitted on its own state", () => {
    const { check } = setup()
    for (let i = 0; i < 5; i++) check.control.outcome(check.control.ticket('m', 'key:flood'), true)
    expect(check.control.scale('m', 'key:flood')).toBeGreaterThan(5)
    expect(check.judge('m', 'key:flood', 100).admit).toBe(false)
    expect(admitted(check.judge('m', 'key:quiet', 100))).toBe(true)
    expect(check.control.scale('m', 'key:quiet')).toBe(1)
  })

  it('rejects invalid options', () => {
    expect(() => new AdmissionControl({ margin: 1 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ decrease: 1 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ increase: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ resetAfterMs: 0 })).toThrow(RangeError)
    expect(() => new AdmissionControl({ maxScale: 0.5 })).toThrow(RangeError)
  })
})
