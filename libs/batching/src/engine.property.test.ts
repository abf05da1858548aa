import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { BatchingConfig } from './config.ts'
import { BatchEngine } from './engine.ts'
import { before, costOf, edfBefore, groupFull, opArb, type Item, type Op } from './engine.property.model.ts'
import { FakeClock } from './fake-clock.ts'
import type { Batch, ExpireReason } from './types.ts'

async function check(initial: Required<BatchingConfig>, concurrency: number, prime: [size: number, ms: number][], ops: Op[]): Promise<void> {
  const clock = new FakeClock(1000)
  const violations: string[] = []
  const accepted = new Map<number, Item>()
  const outcome = new Map<number, 'run' | ExpireReason>()
  const queued = new Map<number, Item>()
  const pending: { resolve(): void; reject(e: unknown): void }[] = []
  let closed = false
  let doomedInPlan: Item[] = []
  let runErrors = 0
  const bad = (msg: string): void => {
    violations.push(`${msg} @${clock.now()}`)
  }
  const settleOutcome = (item: Item, what: 'run' | ExpireReason): void => {
    if (!accepted.has(item.id)) bad(`item ${item.id} was never accepted`)
    if (outcome.has(item.id)) bad(`item ${item.id}: ${what} after ${outcome.get(item.id)}`)
    outcome.set(item.id, what)
    queued.delete(item.id)
  }

  const engine: BatchEngine<Item> = new BatchEngine<Item>({
    ...initial,
    concurrency,
    clock,
    run: (batch: Batch<Item>) => {
      const { maxBatchCost, policy } = engine.config
      // The cap in force (self-tuned under autoBatchSize), never above the hard cap.
      const maxBatchSize = engine.batchCap
      if (maxBatchSize > engine.config.maxBatchSize) bad(`batch cap ${maxBatchSize} > ${engine.config.maxBatchSize}`)
      const order = policy === 'deadline' ? edfBefore : before
      const cost = costOf(batch.items)
      const model = engine.costModel
      if (batch.items.length === 0) bad('empty batch')
      if (batch.items.length > maxBatchSize) bad(`batch of ${batch.items.length} > ${maxBatchSize}`)
      if (batch.items.length > 1 && cost > maxBatchCost) bad(`batch cost ${cost} > ${maxBatchCost}`)
      if (batch.cost !== cost) bad(`batch.cost ${batch.cost} != ${cost}`)
      const tightest = Math.min(...batch.items.map((it) => it.deadline))
      if (policy === 'deadline' && model.samples > 0 && batch.items.length > 1) {
        // A probe batch (every queued item was doomed by the model) may miss: it keeps the executor busy.
        const probe = batch.items.every((it) => clock.now() + model.upper(it.cost) > it.deadline)
        if (!probe && clock.now() + model.upper(cost) > tightest) bad(`deadline batch cannot meet ${tightest}`)
      }
      if (engine.running > concurrency) bad(`running ${engine.running} > ${concurrency}`)
      if (batch.startedAt !== clock.now()) bad('startedAt is not now')
      batch.items.forEach((it, k) => {
        if (it.group !== batch.group) bad(`group ${it.group} in batch of ${batch.group}`)
        if (it.deadline <= clock.now()) bad(`item ${it.id} ran past its deadline`)
        if (batch.queuedMs[k] !== clock.now() - it.enqueuedAt) bad(`queuedMs of ${it.id}`)
        const prev = batch.items[k - 1]
        if (prev !== undefined && !order(prev, it)) bad(`batch not in ${policy} order`)
        settleOutcome(it, 'run')
      })
      const first = batch.items[0] as Item
      const last = batch.items[batch.items.length - 1] as Item
      for (const q of queued.values()) {
        if (q.group === batch.group && order(q, last)) bad(`item ${q.id} skipped in its group`)
        if (policy === 'eager' && before(q, first)) bad(`item ${q.id} should have been chosen first`)
      }
      doomedInPlan = []
      return new Promise<void>((resolve, reject) => pending.push({ resolve, reject }))
    },
    expire: (item, reason) => {
      const now = clock.now()
      if (reason === 'deadline' && item.deadline > now) bad(`item ${item.id} expired early`)
      if (reason === 'doomed') {
        const { policy, maxBatchCost } = engine.config
        const maxBatchSize = engine.batchCap
        const model = engine.costModel
        // The group as the plan saw it: still queued, plus what the same plan doomed before.
        const group = [...queued.values(), ...doomedInPlan].filter((q) => q.group === item.group)
        doomedInPlan.push(item)
        if (item.deadline <= now) bad(`item ${item.id} doomed after its deadline`)
        if (policy === 'timer') bad(`item ${item.id} doomed under timer`)
        const alone = model.samples > 0 && now + model.upper(item.cost) > item.deadline
        // Overload drop: a full batch's worth waits behind it, and it would be late in that batch.
        const overload = model.samples >= 5 && (group.length > maxBatchSize || costOf(group) > maxBatchCost) && item.deadline < now + model.upper(costOf(group))
        if (policy === 'deadline' && !alone && !overload) bad(`deadline: item ${item.id} was not doomed`)
        if (policy === 'eager' && !overload) bad(`eager: item ${item.id} dropped without overload`)
      }
      if (reason === 'closed' && !closed) bad(`item ${item.id} closed before close()`)
      settleOutcome(item, reason)
    },
    onRunError: () => {
      runErrors++
    },
  })

  const checkSync = (): void => {
    doomedInPlan = []
    if (engine.queued !== queued.size) bad(`queued ${engine.queued} != model ${queued.size}`)
    if (clock.timers.length > 1) bad(`${clock.timers.length} timers armed`)
    if (engine.queued === 0 && clock.timers.length > 0) bad('timer armed with an empty queue')
  }
  const checkSettled = (): void => {
    const config = { ...engine.config, maxBatchSize: engine.batchCap }
    const { policy, maxDelayMs } = config
    const model = engine.costModel
    const now = clock.now()
    for (const q of queued.values()) {
      if (q.deadline <= now) bad(`item ${q.id} waits past its deadline`)
    }
    if (engine.running >= concurrency) return
    const waitsAlways = policy === 'eager' || (policy === 'deadline' && (model.samples === 0 || maxDelayMs === 0))
    if (waitsAlways && queued.size > 0) bad(`${policy}: ${queued.size} waiting while a slot is free`)
    if (policy === 'eager') return
    for (const group of new Set([...queued.values()].map((q) => q.group))) {
      const items = [...queued.values()].filter((q) => q.group === group)
      const oldest = Math.min(...items.map((q) => q.enqueuedAt))
      const order = policy === 'deadline' ? edfBefore : before
      if (groupFull(items, config, order)) bad(`${policy}: full group ${group} waiting while a slot is free`)
      if (oldest + maxDelayMs <= now) bad(`${policy}: ripe group ${group} waiting`)
      if (policy !== 'deadline') continue
      for (const q of items) {
        if (now + model.upper(q.cost) > q.deadline) bad(`deadline: doomed item ${q.id} still queued`)
      }
      const tightest = Math.min(...items.map((q) => q.deadline))
      if (tightest - model.upper(costOf(items)) <= now) bad(`deadline: group ${group} waits past its slack`)
    }
  }

  for (const [size, ms] of prime) engine.costModel.observe(size, ms)
  let nextId = 0
  for (const op of ops) {
    switch (op.kind) {
      case 'push': {
        const item: Item = {
          id: nextId++,
          group: op.group,
          priority: op.priority,
          deadline: clock.now() + op.ttl,
          enqueuedAt: clock.now(),
          cost: op.cost,
        }
        const expected = queued.size < engine.config.maxQueue
        const { deadline, group, priority, cost } = item
        const offer = engine.offer({ value: item, deadline, group, priority, ...(cost === 1 ? {} : { cost }) })
        const ok = offer.status === 'queued'
        if (offer.status === 'late') {
          // Admission may refuse only when it is on, judges this policy, and its estimate is late.
          const cfg = engine.config
          if (!cfg.admission || cfg.policy === 'timer') bad(`admission refused under ${cfg.policy}/${cfg.admission}`)
          if (!(offer.estimatedFinishMs !== undefined && clock.now() + offer.estimatedFinishMs > deadline)) {
            bad(`admission refused an item it estimated on time`)
          }
          if (engine.costModel.samples < 5) bad('admission refused before 5 samples')
        } else if (ok !== expected) {
          bad(`offer returned ${offer.status} with ${queued.size}/${engine.config.maxQueue} queued`)
        }
        if (ok) {
          accepted.set(item.id, item)
          queued.set(item.id, item)
        }
        break
      }
      case 'observe':
        engine.costModel.observe(op.size, op.ms)
        engine.configure({}) // a new estimate takes effect at the next decision
        break
      case 'advance':
        clock.advance(op.ms)
        break
      case 'complete': {
        const p = pending.splice(op.pick % Math.max(1, pending.length), 1)[0]
        if (op.fail) p?.reject(new Error('fail'))
        else p?.resolve()
        break
      }
      case 'cancel': {
        const expected = [...queued.values()].filter((q) => q.id % op.mod === op.rem).length
        const n = engine.cancel((v) => v.id % op.mod === op.rem)
        if (n !== expected) bad(`cancel returned ${n}, expected ${expected}`)
        break
      }
      case 'configure':
        engine.configure(op.patch)
        break
      case 'flush':
        clock.flushDefers()
        break
      case 'settle':
        await clock.settle()
        checkSettled()
        break
    }
    checkSync()
  }
  await clock.settle()
  checkSettled()

  closed = true
  engine.close()
  engine.close()
  for (const p of pending.splice(0)) p.resolve()
  await clock.settle()
  await engine.idle()
  checkSync()
  expect(violations).toEqual([])
  expect(engine.running).toBe(0)
  expect(clock.timers).toHaveLength(0)
  for (const id of accepted.keys()) {
    if (!outcome.has(id)) violations.push(`item ${id} neither run nor expired`)
  }
  expect(violations).toEqual([])
  const count = (what: string): number => [...outcome.values()].filter((o) => o === what).length
  expect(engine.stats.items).toBe(count('run'))
  expect(engine.stats.expired).toEqual({
    deadline: count('deadline'),
    cancelled: count('cancelled'),
    closed: count('closed'),
    doomed: count('doomed'),
  })
  const { idle, full, timer, deadline } = engine.stats.dispatched
  expect(idle + full + timer + deadline).toBe(engine.stats.batches)
  expect(runErrors).toBeLessThanOrEqual(engine.stats.batches)
}

describe('BatchEngine properties', () => {
  it('exactly-once, batch bounds, group uniformity, ordering and no idle waiting', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          maxBatchSize: fc.integer({ min: 1, max: 5 }),
          maxDelayMs: fc.integer({ min: 0, max: 8 }),
          policy: fc.constantFrom('eager' as const, 'timer' as const, 'deadline' as const),
          maxQueue: fc.integer({ min: 1, max: 12 }),
          maxBatchCost: fc.oneof(fc.constant(Infinity), fc.integer({ min: 1, max: 6 })),
          admission: fc.boolean(),
          autoBatchSize: fc.boolean(),
          sloMs: fc.constant(0),
          maxTenantQueue: fc.constant(0),
        }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 4 })), { maxLength: 8 }),
        fc.array(opArb, { maxLength: 80, size: 'medium' }),
        check,
      ),
      { numRuns: 1000 },
    )
  }, 60_000)
})
