import { describe, expect, it } from 'vitest'
import type { CostModel } from './cost-model.ts'
import { pushAll, harness } from './test-harness.ts'

/** Teach the engine's model t(b) = 2 + b exactly, with `n` samples (upper = estimate). */
function teach(engine: { costModel: CostModel }, n = 5): void {
  for (let i = 0; i < n; i++) engine.costModel.observe(1 + (i % 4), 2 + 1 + (i % 4))
}

describe('admission at enqueue', () => {
  it("refuses at once, as 'late', an arrival that would finish after its deadline behind the queued work", async () => {
    const h = harness({ maxBatchSize: 2 })
    teach(h.engine)
    pushAll(h, 'busy') // running from t=0, expected end 0 + t(1) = 3
    h.clock.flushDefers()
    pushAll(h, 'q1', 'q2') // one full batch ahead: 3 + t(2) = 7
    // Own batch after that: 7 + t(1) = 10.
    const late = h.engine.offer({ value: 'late', deadline: 9 })
    expect(late.status).toBe('late')
    expect(late.status === 'late' && late.estimatedFinishMs).toBeCloseTo(10)
    expect(h.engine.offer({ value: 'fits', deadline: 10.5 })).toEqual({ status: 'queued' })
    expect(h.engine.stats.refused).toEqual({ full: 0, late: 1 })
    // The refused item is never run nor expired: it is the caller's to answer.
    h.clock.advance(3)
    await h.complete()
    h.clock.advance(4)
    await h.complete()
    h.clock.advance(3)
    await h.complete()
    expect(h.items()).toEqual([['busy'], ['q1', 'q2'], ['fits']])
    expect(h.expired).toEqual([])
  })

  it('counts only the work that runs before the arrival: higher priority goes ahead, lower does not', () => {
    const h = harness({ maxBatchSize: 1 })
    teach(h.engine)
    pushAll(h, 'busy') // ends at 3
    h.clock.flushDefers()
    for (let i = 0; i < 4; i++) h.engine.push({ value: `low${i}`, deadline: Infinity, priority: 0 })
    // A high-priority arrival only waits for the running batch: 3 + t(1) = 6.
    expect(h.engine.offer({ value: 'hi', deadline: 6.5, priority: 1 })).toEqual({ status: 'queued' })
    // A low one waits for 4 lows and the high one: 3 + 6 * 3 = 21.
    const low = h.engine.offer({ value: 'low', deadline: 20, priority: 0 })
    expect(low.status === 'late' && low.estimatedFinishMs).toBeCloseTo(21)
  })

  it('spreads the work ahead over every executor slot', () => {
    const h = harness({ maxBatchSize: 1, concurrency: 2 })
    teach(h.engine)
    pushAll(h, 'r1', 'r2') // both slots busy until 3
    h.clock.flushDefers()
    pushAll(h, 'q1', 'q2') // one on each slot: both end at 6
    const x = h.engine.offer({ value: 'x', deadline: 8 })
    expect(x.status === 'late' && x.estimatedFinishMs).toBeCloseTo(9)
    expect(h.engine.offer({ value: 'y', deadline: 9.5 })).toEqual({ status: 'queued' })
  })

  it('deadline policy: an arrival with an earlier deadline jumps the queue, so it is judged by what runs before it', () => {
    const h = harness({ maxBatchSize: 1, policy: 'deadline', maxDelayMs: 0 })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    for (let i = 0; i < 4; i++) h.engine.push({ value: `far${i}`, deadline: 100 })
    expect(h.engine.offer({ value: 'urgent', deadline: 6.5 })).toEqual({ status: 'queued' })
    // Under eager (arrival order) the same arrival would wait for all four: 3 + 5 * 3 = 18.
    h.engine.configure({ policy: 'eager' })
    expect(h.engine.offer({ value: 'urgent2', deadline: 6.5 }).status).toBe('late')
  })

  it('never refuses when the group is empty and a slot is free (a stale model must get fresh samples)', () => {
    const h = harness({ maxBatchSize: 2 })
    for (let i = 0; i < 10; i++) h.engine.costModel.observe(1, 100) // pessimistic: t(1) = 100
    expect(h.engine.offer({ value: 'a', deadline: 10 })).toEqual({ status: 'queued' })
    expect(h.engine.offer({ value: 'b', deadline: 10 })).toMatchObject({ status: 'late' })
  })

  it('judges nothing before 5 samples, under the timer policy, with admission off, or without a deadline', () => {
    for (const opts of [{ samples: 4 }, { policy: 'timer' as const }, { admission: false }, { deadline: Infinity }]) {
      const h = harness({ maxBatchSize: 1, ...('policy' in opts ? { policy: opts.policy } : {}), ...('admission' in opts ? { admission: opts.admission } : {}) })
      teach(h.engine, 'samples' in opts && opts.samples !== undefined ? opts.samples : 5)
      pushAll(h, 'busy', 'q1', 'q2')
      h.clock.flushDefers()
      const deadline = 'deadline' in opts && opts.deadline !== undefined ? opts.deadline : 1
      expect(h.engine.offer({ value: 'x', deadline }), JSON.stringify(opts)).toEqual({ status: 'queued' })
    }
  })

  it('is reconfigurable at run time', () => {
    const h = harness({ maxBatchSize: 1 })
    teach(h.engine)
    pushAll(h, 'busy', 'q1')
    h.clock.flushDefers()
    expect(h.engine.offer({ value: 'x', deadline: 1 }).status).toBe('late')
    h.engine.configure({ admission: false })
    expect(h.engine.offer({ value: 'y', deadline: 1 }).status).toBe('queued')
  })

  it("answers 'full' with a Retry-After hint when the bound is reached, and 'closed' after close", () => {
    const h = harness({ maxBatchSize: 2, maxQueue: 2, admission: false })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    pushAll(h, 'q1', 'q2')
    const full = h.engine.offer({ value: 'q3', deadline: Infinity })
    expect(full.status).toBe('full')
    expect(full.status === 'full' && full.retryAfterMs).toBeGreaterThan(0)
    expect(h.engine.stats.refused.full).toBe(1)
    h.engine.close()
    expect(h.engine.offer({ value: 'q4', deadline: Infinity })).toEqual({ status: 'closed' })
  })
})

describe('admission: infeasible even alone', () => {
  it('flags an arrival whose deadline is shorter than its own batch time, with that time (answer 504, not 503)', () => {
    const h = harness({ maxBatchSize: 2 })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    pushAll(h, 'q1')
    const alone = h.engine.offer({ value: 'a', deadline: 2 }) // t(1) = 3 > 2
    expect(alone).toMatchObject({ status: 'late', infeasible: true })
    expect(alone.status === 'late' ? alone.aloneMs : undefined).toBeGreaterThan(2)
    const behind = h.engine.offer({ value: 'b', deadline: 5 }) // alone 3 <= 5, behind the queue 3 + t(2) = 7 > 5
    expect(behind).toMatchObject({ status: 'late', infeasible: false })
  })
})
