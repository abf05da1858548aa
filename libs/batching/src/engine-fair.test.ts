import { describe, expect, it } from 'vitest'
import { harness, type Harness } from './test-harness.ts'

type V = { t: string; i: number }

/** Let the engine dispatch, then complete each running batch after `ms` of fake time, `n` times. Returns the batches' items. */
async function runBatches(h: Harness<V>, n: number, ms = 10): Promise<V[][]> {
  const out: V[][] = []
  for (let k = 0; k < n; k++) {
    h.clock.flushDefers()
    const run = h.pending()[0]
    if (run === undefined) {
      break
    }
    out.push(run.batch.items)
    h.clock.advance(ms)
    await h.complete()
  }
  return out
}

function push(h: Harness<V>, tenant: string, n: number, o: { deadline?: number; priority?: number; from?: number } = {}): string[] {
  const answers: string[] = []
  for (let i = 0; i < n; i++) {
    const offer = h.engine.offer({ value: { t: tenant, i: (o.from ?? 0) + i }, deadline: o.deadline ?? Infinity, tenant, priority: o.priority ?? 0 })
    answers.push(offer.status)
  }
  return answers
}

describe('BatchEngine fair shares between tenants (start-time fair queueing)', () => {
  it('a quiet tenant arriving behind a flood gets half the batch slots at once, not the back of the queue', async () => {
    const h = harness<V>({ maxBatchSize: 4, admission: false })
    push(h, 'flood', 40)
    h.clock.flushDefers() // the first batch (4 flood items) runs
    push(h, 'quiet', 4)
    const batches = await runBatches(h, 3)
    expect(batches.map((b) => b.map((v) => v.t))).toEqual([
      ['flood', 'flood', 'flood', 'flood'],
      ['quiet', 'flood', 'quiet', 'flood'],
      ['quiet', 'flood', 'quiet', 'flood'],
    ])
    // Without tenants (one anonymous tenant), the same arrivals are plain FIFO: the quiet items
    // wait behind all 36 flood items.
    const fifo = harness<V>({ maxBatchSize: 4, admission: false })
    for (let i = 0; i < 40; i++) fifo.engine.push({ value: { t: 'flood', i }, deadline: Infinity })
    fifo.clock.flushDefers()
    for (let i = 0; i < 4; i++) fifo.engine.push({ value: { t: 'quiet', i }, deadline: Infinity })
    const fifoNext = await runBatches(fifo, 3)
    expect(fifoNext.flat().some((v) => v.t === 'quiet')).toBe(false)
  })

  it('backlogged tenants share slots in proportion to their weights', async () => {
    const h = harness<V>({ maxBatchSize: 4, admission: false, tenantWeight: (t) => (t === 'gold' ? 3 : 1) })
    push(h, 'basic', 60)
    push(h, 'gold', 60)
    const batches = await runBatches(h, 8)
    const served = batches.flat()
    expect(served).toHaveLength(32)
    const gold = served.filter((v) => v.t === 'gold').length
    expect(gold).toBeGreaterThanOrEqual(22)
    expect(gold).toBeLessThanOrEqual(26)
    // Each tenant's own items keep their order.
    const golds = served.filter((v) => v.t === 'gold').map((v) => v.i)
    expect(golds).toEqual([...golds].sort((a, b) => a - b))
  })

  it('priorities still order within a tenant', async () => {
    const h = harness<V>({ maxBatchSize: 1, admission: false })
    push(h, 'a', 3, { priority: 0 })
    push(h, 'a', 1, { priority: 5, from: 100 })
    const order = (await runBatches(h, 4)).flat().map((v) => v.i)
    // Dispatch waits for the current turn: the high-priority item runs first, then arrival order.
    expect(order).toEqual([100, 0, 1, 2])
  })

  it('maxTenantQueue refuses one tenant past its own bound while others are still queued', () => {
    const h = harness<V>({ maxBatchSize: 4, maxTenantQueue: 5, admission: false })
    h.clock.flushDefers()
    expect(push(h, 'flood', 7)).toEqual(['queued', 'queued', 'queued', 'queued', 'queued', 'full', 'full'])
    expect(h.engine.offer({ value: { t: 'flood', i: 9 }, deadline: Infinity, tenant: 'flood' })).toMatchObject({ status: 'full', tenant: true })
    expect(push(h, 'quiet', 2)).toEqual(['queued', 'queued'])
    expect(h.engine.queuedByTenant()).toEqual(
      new Map([
        ['flood', 5],
        ['quiet', 2],
      ]),
    )
  })

  it('admission refuses the flood while the quiet tenant is admitted and served before its deadline', async () => {
    const run = (tenants: boolean) => async () => {
      const h = harness<V>({ maxBatchSize: 4, policy: 'eager' })
      for (let k = 0; k < 8; k++) h.engine.costModel.observe(4, 10) // learned: 10 ms per batch of 4
      h.engine.costModel.observe(1, 10)
      const flood = push(h, tenants ? 'flood' : '', 200, { deadline: 100 })
      h.clock.flushDefers()
      h.clock.advance(1)
      const quietAt = h.clock.now()
      const quiet: string[] = []
      for (let i = 0; i < 4; i++) {
        quiet.push(h.engine.offer({ value: { t: 'quiet', i }, deadline: quietAt + 35, ...(tenants ? { tenant: 'quiet' } : {}) }).status)
      }
      const ranAt = new Map<number, number>()
      for (let k = 0; k < 40 && (h.pending().length > 0 || h.engine.queued > 0); k++) {
        h.clock.flushDefers()
        const r = h.pending()[0]
        if (!r) break
        r.batch.items.forEach((v) => v.t === 'quiet' && ranAt.set(v.i, h.clock.now() + 10))
        h.clock.advance(10)
        await h.complete()
      }
      return { flood, quiet, ranAt, quietAt }
    }
    const fair = await run(true)()
    expect(fair.flood.filter((s) => s === 'late').length).toBeGreaterThan(100)
    expect(fair.quiet).toEqual(['queued', 'queued', 'queued', 'queued'])
    expect([...fair.ranAt.values()].every((end) => end <= fair.quietAt + 35)).toBe(true)
    expect(fair.ranAt.size).toBe(4)
    // Control: as one tenant, the quiet items are refused behind the flood.
    const fifo = await run(false)()
    expect(fifo.quiet.filter((s) => s === 'late').length).toBeGreaterThan(0)
  })
})
