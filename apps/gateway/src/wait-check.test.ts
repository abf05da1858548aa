// The door's worker-wait check and the admission state it reads (wait-table.ts), on a fake clock:
// the refusal decision, stale expiry, the bounded-rate probe, per-tenant waits, the feed from
// heartbeats and v2 accept notices, and the work the door admitted since the last estimate.
import { describe, expect, it } from 'vitest'
import { FakeClock } from '@cohort/batching'
import { WorkerWaitCheck } from './wait-check.ts'
import { WorkerWaits } from './wait-table.ts'

function setup(o: { probeIntervalMs?: number; staleHeartbeats?: number } = {}) {
  const clock = new FakeClock(1_000_000)
  const waits = new WorkerWaits(() => clock.now())
  // Margin 0: these tests check the estimates themselves (the margin and feedback: admission-control.test.ts).
  const check = new WorkerWaitCheck(waits, {
    probeIntervalMs: o.probeIntervalMs ?? 100,
    ...(o.staleHeartbeats ? { staleHeartbeats: o.staleHeartbeats } : {}),
    control: { margin: 0 },
  })
  return { clock, waits, check }
}

/** The verdict's kind: 'admit', 'probe' or the refusal's code. */
const kind = (v: ReturnType<WorkerWaitCheck['judge']>) => (v.admit ? (v.probe ? 'probe' : 'admit') : v.error.code)

describe('WorkerWaitCheck (the door refuses what no worker can finish in time)', () => {
  it('admits while nothing is known of the model', () => {
    const { check } = setup()
    expect(kind(check.judge('m', '', 1))).toBe('admit')
  })

  it('refuses 503 OVERLOADED with Retry-After when the best worker wait plus service exceeds the time left, after one probe', () => {
    const { waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 40, waitMs: 900, serviceMs: 20 } })
    waits.heartbeat('w2', 1000, { m: { queued: 10, waitMs: 300, serviceMs: 20 } })
    expect(kind(check.judge('m', '', 320))).toBe('admit') // w2 finishes at 320: just in time
    expect(kind(check.judge('m', '', 319))).toBe('probe') // the first late one goes through as a probe
    const v = check.judge('m', '', 319)
    expect(kind(v)).toBe('OVERLOADED')
    if (!v.admit) {
      expect(v.error.status).toBe(503)
      expect(v.error.retryAfterS).toBe(1)
      expect(v.error.message).toMatch(/worker-wait check/)
      expect(v.error.message).toMatch(/best of 2 workers: about 300 ms of queued work and 20 ms to run it, 319 ms left, of which admission fills at most 100%\)/)
    }
    // Another model is not affected.
    expect(kind(check.judge('other', '', 1))).toBe('admit')
  })

  it('admits what even an idle worker cannot finish (less time than the service estimate): the worker answers that exactly, a retry would not help', () => {
    const { waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 40, waitMs: 900, serviceMs: 50 } })
    check.judge('m', '', 100) // the probe
    expect(kind(check.judge('m', '', 49))).toBe('admit')
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
  })

  it('refuses 400 DEADLINE_TOO_SHORT, naming the time, a budget below what every fresh worker needs to run the item alone; admits one that fits or when a worker did not say', () => {
    const { waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 30, aloneMs: 12 } })
    waits.heartbeat('w2', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 30, aloneMs: 9.5 } })
    const v = check.judge('m', '', 9)
    expect(kind(v)).toBe('DEADLINE_TOO_SHORT')
    if (!v.admit) {
      expect(v.error.status).toBe(400)
      expect(v.error.retryAfterS).toBeUndefined()
      expect(v.error.message).toBe(
        'model "m" needs about 10 ms to run this item even alone on an idle worker, and its deadline left 9 ms; it was not sent: send a deadline of at least 10 ms',
      )
    }
    // The whole budget counts, not what the gateway's own delay left of it (that is overload).
    expect(kind(check.judge('m', '', 5, 0, 50))).not.toBe('DEADLINE_TOO_SHORT')
    expect(kind(check.judge('m', '', 10))).toBe('admit')
    // A worker that does not say (an older one): the worker judges it.
    waits.heartbeat('w3', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 30 } })
    expect(kind(check.judge('m', '', 9))).not.toBe('DEADLINE_TOO_SHORT')
  })

  it('lets one probe through per probeIntervalMs while every estimate says late (never a permanent lockout)', () => {
    const { clock, waits, check } = setup({ probeIntervalMs: 100 })
    const verdicts: string[] = []
    for (let t = 0; t < 300; t += 10) {
      // Keep the estimate fresh and late the whole time (the worker's queue stays long).
      waits.accepted('m', 'w1', { waitMs: 5000, serviceMs: 10 })
      verdicts.push(kind(check.judge('m', '', 200)))
      clock.advance(10)
    }
    expect(verdicts.filter((v) => v === 'probe')).toHaveLength(3) // at t = 0, 100, 200
    expect(verdicts.filter((v) => v === 'OVERLOADED')).toHaveLength(27)
    expect(verdicts.filter((v) => v === 'admit')).toHaveLength(0)
  })

  it('ages an estimate by the time since it came: the known queued work drains', () => {
    const { clock, waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 40, waitMs: 500, serviceMs: 10 } })
    check.judge('m', '', 100) // the probe
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    clock.advance(420) // 80 ms of the estimate left + 10 ms service < 100 ms
    expect(kind(check.judge('m', '', 100))).toBe('admit')
  })

  it('drops an estimate older than staleHeartbeats heartbeat intervals of its worker: the door admits again', () => {
    const { clock, waits, check } = setup({ staleHeartbeats: 2, probeIntervalMs: 60_000 })
    waits.heartbeat('w1', 1000, { m: { queued: 40, waitMs: 60_000, serviceMs: 10 } })
    check.judge('m', '', 100) // the probe
    clock.advance(1999)
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    clock.advance(2)
    expect(kind(check.judge('m', '', 100))).toBe('admit')
    expect(waits.best('m', '', 2)).toBeUndefined()
  })

  it('a heartbeat without the model (the engine stopped judging) or a bye forgets that worker', () => {
    const { waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 40, waitMs: 60_000, serviceMs: 10 } })
    check.judge('m', '', 100) // the probe
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    waits.heartbeat('w1', 1000, undefined)
    expect(kind(check.judge('m', '', 100))).toBe('admit')
    waits.accepted('m', 'w2', { waitMs: 60_000, serviceMs: 10 })
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    waits.forget('w2')
    expect(kind(check.judge('m', '', 100))).toBe('admit')
  })

  it('a fresh worker that does not judge arrivals (an accept notice without waitMs) makes the door admit', () => {
    const { waits, check } = setup()
    waits.accepted('m', 'w1', { waitMs: 60_000, serviceMs: 10 })
    check.judge('m', '', 100) // the probe
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    waits.accepted('m', 'w2', {})
    expect(kind(check.judge('m', '', 100))).toBe('admit')
  })

  it("per tenant: a flooding tenant is refused by its own wait while a quiet tenant's fresh wait admits it", () => {
    const { waits, check } = setup()
    waits.heartbeat('w1', 1000, { m: { queued: 400, waitMs: 5, serviceMs: 10, tenants: { 'key:0': 4000 } } })
    expect(kind(check.judge('m', 'key:1', 100))).toBe('admit')
    check.judge('m', 'key:0', 100) // the probe
    expect(kind(check.judge('m', 'key:0', 100))).toBe('OVERLOADED')
    expect(kind(check.judge('m', 'key:1', 100))).toBe('admit')
    // An accept notice updates the tenants it names and keeps the others.
    waits.accepted('m', 'w1', { waitMs: 5, serviceMs: 10, tenants: { 'key:2': 3000 } })
    expect(kind(check.judge('m', 'key:0', 100))).toBe('OVERLOADED')
    expect(kind(check.judge('m', 'key:2', 100))).toBe('OVERLOADED')
    waits.accepted('m', 'w1', { waitMs: 5, serviceMs: 10, tenants: { 'key:0': 5 } })
    expect(kind(check.judge('m', 'key:0', 100))).toBe('admit')
  })

  /** Judge `n` requests at once; the verdict kinds in order. */
  const burst = (check: WorkerWaitCheck, n: number, tenant = '', left = 100) => Array.from({ length: n }, () => kind(check.judge('m', tenant, left)))
  const count = (vs: string[], k: string) => vs.filter((v) => v === k).length

  it('a burst after one estimate is refused once the work it admitted would make the next request late, before any new estimate', () => {
    const { waits, check } = setup({ probeIntervalMs: 60_000 })
    // One idle worker: 10 ms to run a batch, each queued item adds 2 ms.
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    const vs = burst(check, 60)
    // Request k sees (k - 1) x 2 ms of admitted work: it fits while (k - 1) x 2 + 10 <= 100, so 46 fit;
    // the 47th is the probe, the rest are refused.
    expect(vs.slice(0, 46).every((v) => v === 'admit')).toBe(true)
    expect(vs[46]).toBe('probe')
    expect(count(vs.slice(47), 'OVERLOADED')).toBe(13)
    expect(waits.best('m', '', 2)!.waitMs).toBeCloseTo(92)
  })

  it('control: an estimate without itemMs (an older worker) adds nothing, so the same burst is all admitted until the next estimate', () => {
    const { waits, check } = setup({ probeIntervalMs: 60_000 })
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10 } })
    expect(count(burst(check, 60), 'admit')).toBe(60)
  })

  it('the admitted work drains with time, and a new estimate (heartbeat or accept notice) replaces it', () => {
    const { clock, waits, check } = setup({ probeIntervalMs: 60_000 })
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    burst(check, 48) // 46 admitted (92 ms), a probe, a refusal
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    clock.advance(40) // 52 ms of it left
    expect(waits.best('m', '', 2)!.waitMs).toBeCloseTo(52)
    expect(kind(check.judge('m', '', 100))).toBe('admit') // now 54 ms
    burst(check, 30)
    expect(kind(check.judge('m', '', 100))).toBe('OVERLOADED')
    waits.accepted('m', 'w1', { waitMs: 5, serviceMs: 10, itemMs: 2, tenants: { '': 5 } }) // the worker's own count
    expect(waits.best('m', '', 2)!.waitMs).toBeCloseTo(5)
    expect(kind(check.judge('m', '', 100))).toBe('admit')
    burst(check, 60)
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    expect(waits.best('m', '', 2)!.waitMs).toBe(0)
  })

  it('with two workers each is charged half of what the door admitted (NATS picks the worker), so about twice the burst fits', () => {
    const { waits, check } = setup({ probeIntervalMs: 60_000 })
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    waits.heartbeat('w2', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    // Request k sees (k - 1) ms on each worker: it fits while k - 1 <= 90.
    const vs = burst(check, 100)
    expect(count(vs.slice(0, 91), 'admit')).toBe(91)
    expect(vs[91]).toBe('probe')
    expect(count(vs.slice(92), 'OVERLOADED')).toBe(8)
  })

  it("per tenant: what the door admitted of a flooding tenant grows that tenant's wait, not a quiet tenant's", () => {
    const { waits, check } = setup({ probeIntervalMs: 60_000 })
    waits.heartbeat('w1', 1000, { m: { queued: 0, waitMs: 0, serviceMs: 10, itemMs: 2 } })
    const flood = burst(check, 60, 'key:0')
    expect(count(flood, 'admit')).toBe(46)
    expect(count(flood, 'OVERLOADED')).toBe(13)
    expect(kind(check.judge('m', 'key:1', 100))).toBe('admit')
    expect(waits.best('m', 'key:1', 2)!.waitMs).toBeCloseTo(2) // its own one item
  })

  it('rejects invalid options', () => {
    const waits = new WorkerWaits()
    expect(() => new WorkerWaitCheck(waits, { probeIntervalMs: -1 })).toThrow(RangeError)
    expect(() => new WorkerWaitCheck(waits, { staleHeartbeats: 0 })).toThrow(RangeError)
  })
})
