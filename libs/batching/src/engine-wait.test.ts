import { describe, expect, it } from 'vitest'
import type { CostModel } from './cost-model.ts'
import { pushAll, harness } from './test-harness.ts'
import type { QueueWait } from './admission.ts'

/** The estimate rounded to 1e-6 ms (float noise of the cost fit). */
function rounded(w: QueueWait | undefined) {
  return w && { queued: w.queued, waitMs: Math.round(w.waitMs * 1e6) / 1e6, serviceMs: Math.round(w.serviceMs * 1e6) / 1e6 }
}

/** Teach the engine's model t(b) = 2 + b exactly, with `n` samples (upper = estimate). */
function teach(engine: { costModel: CostModel }, n = 5): void {
  for (let i = 0; i < n; i++) engine.costModel.observe(1 + (i % 4), 2 + 1 + (i % 4))
}

describe('BatchEngine.waitEstimate (the queue wait the gateway door judges by)', () => {
  it('is the start of the batch a new item would run in, behind the running and queued work, and that batch cost', () => {
    const h = harness({ maxBatchSize: 2 })
    teach(h.engine)
    expect(rounded(h.engine.waitEstimate())).toEqual({ queued: 0, waitMs: 0, serviceMs: 3 }) // idle: starts at once, t(1) = 3
    pushAll(h, 'busy') // running from t=0, expected end 3
    h.clock.flushDefers()
    pushAll(h, 'q1', 'q2') // one full batch ahead: 3 + t(2) = 7
    // The one (anonymous) tenant's new item goes behind its queued items: it starts at 7, t(1) = 3.
    expect(h.engine.waitEstimate([''])!.tenants.get('')).toBeCloseTo(7)
    // A tenant with nothing queued would share the next batch with q1 (equal tags: q1 arrived first):
    // it starts at 3, in a batch of 2 (t(2) = 4).
    expect(rounded(h.engine.waitEstimate())).toEqual({ queued: 2, waitMs: 3, serviceMs: 4 })
    // It agrees with admission: an item with 9 ms left is refused (finish 10), one with 10.5 queued.
    expect(h.engine.offer({ value: 'late', deadline: 9 }).status).toBe('late')
    h.clock.advance(1)
    expect(h.engine.waitEstimate([''])!.tenants.get('')).toBeCloseTo(6) // the known work drains with time
  })

  it('is absent whenever the engine itself would not judge arrivals (no samples yet, admission off, timer policy, closed)', () => {
    const cold = harness({ maxBatchSize: 2 })
    teach(cold.engine, 4) // one short of EARLY_DROP_MIN_SAMPLES
    expect(cold.engine.waitEstimate()).toBeUndefined()
    teach(cold.engine, 1)
    expect(cold.engine.waitEstimate()).toBeDefined()
    const off = harness({ maxBatchSize: 2, admission: false })
    teach(off.engine)
    expect(off.engine.waitEstimate()).toBeUndefined()
    const timer = harness({ maxBatchSize: 2, policy: 'timer', maxDelayMs: 5 })
    teach(timer.engine)
    expect(timer.engine.waitEstimate()).toBeUndefined()
    const closed = harness({ maxBatchSize: 2 })
    teach(closed.engine)
    closed.engine.close()
    expect(closed.engine.waitEstimate()).toBeUndefined()
  })

  it("per tenant: a flooding tenant's new item waits behind its own queue, a quiet tenant's goes to the front", () => {
    const h = harness({ maxBatchSize: 1 })
    teach(h.engine)
    h.engine.push({ value: 'busy', deadline: Infinity, tenant: 'flood' }) // running, ends at 3
    h.clock.flushDefers()
    for (let i = 0; i < 4; i++) h.engine.push({ value: `f${i}`, deadline: Infinity, tenant: 'flood' })
    const w = h.engine.waitEstimate(['flood', 'quiet', 'flood'])!
    // A quiet tenant's item (tag = virtual time, tied with f0, which arrived first) runs after the
    // running batch and f0 only: 3 + t(1) = 6.
    expect(w.waitMs).toBeCloseTo(6)
    // The flooder's new item goes after its 4 queued items: 3 + 4 * t(1) = 15.
    expect(w.tenants.get('flood')).toBeCloseTo(15)
    // A tenant with nothing queued gets the fresh wait.
    expect(w.tenants.get('quiet')).toBe(w.waitMs)
    expect([...w.tenants.keys()]).toEqual(['flood', 'quiet'])
  })

  it('deadline policy: a lower bound (an arrival may overtake every later deadline): only running batches count', () => {
    const h = harness({ maxBatchSize: 1, policy: 'deadline', maxDelayMs: 0 })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    for (let i = 0; i < 3; i++) h.engine.push({ value: `q${i}`, deadline: 1000 })
    expect(rounded(h.engine.waitEstimate())).toMatchObject({ queued: 3, waitMs: 3 })
  })

  it("itemMs: each more queued item adds a full batch's upper cost per item over the executors", () => {
    const one = harness({ maxBatchSize: 2 })
    teach(one.engine)
    expect(one.engine.waitEstimate()!.itemMs).toBeCloseTo(2) // t(2) = 4 over 2 items
    const two = harness({ maxBatchSize: 4, concurrency: 2 })
    teach(two.engine)
    expect(two.engine.waitEstimate()!.itemMs).toBeCloseTo(0.75) // t(4) = 6 over 4 items and 2 executors
    const costly = harness({ maxBatchSize: 4, maxBatchCost: 2 })
    teach(costly.engine)
    expect(costly.engine.waitEstimate()!.itemMs).toBeCloseTo(2) // the cost budget caps a batch at 2 items
  })

  it('aloneMs: the estimate of one item run alone, whatever is queued (the door refuses a shorter deadline 400)', () => {
    const h = harness({ maxBatchSize: 2 })
    teach(h.engine)
    const idle = h.engine.waitEstimate()!.aloneMs
    expect(idle).toBeCloseTo(h.engine.costModel.estimate(1))
    expect(idle).toBeGreaterThan(0)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    expect(h.engine.waitEstimate()!.aloneMs).toBeCloseTo(idle)
  })
})
