import { describe, expect, it } from 'vitest'
import type { Policy } from './config.ts'
import type { CostModel } from './cost-model.ts'
import { BatchEngine } from './engine.ts'
import { FakeClock } from './fake-clock.ts'
import { harness, pushAll } from './test-harness.ts'
import type { ExpireReason } from './types.ts'

/** Teach the engine's model t(b) = 2 + b exactly, with `n` samples. */
function teach(engine: { costModel: CostModel }, n = 5): void {
  for (let i = 0; i < n; i++) engine.costModel.observe(1 + (i % 4), 2 + 1 + (i % 4))
}

describe('early dropping under overload', () => {
  // Admission off: these tests pin the head-of-queue decision (admission-test.ts covers arrival).
  it("eager: drops the items the full batch would finish late, as 'doomed', and refills the batch", async () => {
    const h = harness({ maxBatchSize: 2, admission: false })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'o1', deadline: 5 }) // a pair dispatched at 3 ends at 3 + upper(2) = 7 > 5
    h.engine.push({ value: 'o2', deadline: 50 })
    h.engine.push({ value: 'o3', deadline: 50 })
    h.engine.push({ value: 'o4', deadline: 50 })
    h.clock.advance(3)
    await h.complete() // 'busy' took 3 ms = upper(1): the model is unchanged
    expect(h.expired).toEqual([['o1', 'doomed']])
    expect(h.runs[1]?.batch).toMatchObject({ items: ['o2', 'o3'], reason: 'full' })
    expect(h.engine.stats.expired.doomed).toBe(1)
  })

  it('eager: drops nothing while the queue holds no more than one batch (low load)', async () => {
    const h = harness({ maxBatchSize: 2, admission: false })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'o1', deadline: 5 })
    h.engine.push({ value: 'o2', deadline: 50 })
    h.clock.advance(3)
    await h.complete()
    expect(h.expired).toEqual([])
    expect(h.runs[1]?.batch.items).toEqual(['o1', 'o2'])
  })

  it('eager: drops nothing before the model has 5 samples', async () => {
    const h = harness({ maxBatchSize: 2 })
    teach(h.engine, 3)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'o1', deadline: 5 })
    pushAll(h, 'o2', 'o3')
    h.clock.advance(3)
    await h.complete()
    expect(h.expired).toEqual([])
    expect(h.runs[1]?.batch.items).toEqual(['o1', 'o2'])
  })

  it("timer: never drops early (only expired deadlines, as 'deadline')", async () => {
    const h = harness({ maxBatchSize: 2, policy: 'timer', maxDelayMs: 0 })
    teach(h.engine)
    pushAll(h, 'busy')
    h.clock.flushDefers()
    h.engine.push({ value: 'o1', deadline: 5 })
    pushAll(h, 'o2', 'o3')
    h.clock.advance(3)
    await h.complete()
    expect(h.expired).toEqual([])
    expect(h.runs[1]?.batch.items).toEqual(['o1', 'o2'])
  })
})

interface Req {
  deadline: number
}

interface Outcome {
  onTime: number
  late: number
  expired: Record<ExpireReason, number>
  meanBatch: number
}

/**
 * Open-loop overload: arrivals at `load` times the capacity of full batches, each with a `budget`
 * ms deadline; `run` takes exactly t(b) = a + c·b of fake time. Event-driven on a `FakeClock`.
 */
async function simulate(policy: Policy, load: number, durationMs = 1500): Promise<Outcome> {
  const a = 2
  const c = 0.5
  const maxBatchSize = 8
  const budget = 30
  const capacity = maxBatchSize / (a + c * maxBatchSize) // items per ms
  const gap = 1 / (capacity * load)
  const clock = new FakeClock(0)
  const expired = { deadline: 0, cancelled: 0, closed: 0, doomed: 0 }
  const out: Outcome = { onTime: 0, late: 0, expired, meanBatch: 0 }
  const engine = new BatchEngine<Req>({
    clock,
    policy,
    maxBatchSize,
    maxDelayMs: 0,
    run: (batch) =>
      new Promise<void>((resolve) => {
        clock.setTimeout(
          () => {
            for (const req of batch.items) {
              if (clock.now() <= req.deadline) out.onTime++
              else out.late++
            }
            resolve()
          },
          a + c * batch.items.length,
        )
      }),
    expire: (_req, reason) => {
      out.expired[reason]++
    },
  })
  let nextArrival = 0
  while (clock.now() < durationMs) {
    const next = Math.min(nextArrival, clock.timers[0]?.due ?? Infinity)
    clock.advanceTo(next)
    while (nextArrival <= clock.now()) {
      engine.push({ value: { deadline: nextArrival + budget }, deadline: nextArrival + budget })
      nextArrival += gap
    }
    await clock.settle()
  }
  engine.close()
  out.meanBatch = engine.stats.items / engine.stats.batches
  return out
}

describe('goodput under 2x overload', () => {
  it('early dropping keeps run items on time and goodput near capacity; naive FIFO collapses', async () => {
    const capacity = 8 / 6 // items per ms with full batches of t(8) = 6 ms
    const ms = 1500
    const eager = await simulate('eager', 2, ms)
    const deadline = await simulate('deadline', 2, ms)
    const fifo = await simulate('timer', 2, ms) // maxDelayMs 0: FIFO, lazy dropping only

    for (const r of [eager, deadline]) {
      expect(r.onTime / (r.onTime + r.late)).toBeGreaterThanOrEqual(0.9)
      expect(r.onTime / ms).toBeGreaterThan(0.85 * capacity)
      expect(r.expired.doomed).toBeGreaterThan(0)
      expect(r.meanBatch).toBeGreaterThan(7)
    }
    // The naive FIFO keeps serving the oldest, nearly expired items: most of them finish late.
    expect(fifo.expired.doomed).toBe(0)
    expect(fifo.onTime / (fifo.onTime + fifo.late)).toBeLessThan(0.5)
    expect(eager.onTime).toBeGreaterThan(2 * fifo.onTime)
    expect(deadline.onTime).toBeGreaterThan(2 * fifo.onTime)
  }, 30_000)

  it('at half load nothing is dropped and everything is on time, under every policy', async () => {
    for (const policy of ['eager', 'deadline', 'timer'] as const) {
      const r = await simulate(policy, 0.5, 500)
      expect(r.expired).toEqual({ deadline: 0, cancelled: 0, closed: r.expired.closed, doomed: 0 })
      expect(r.late).toBe(0)
      expect(r.onTime).toBeGreaterThan(150)
    }
  })
})
