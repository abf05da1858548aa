import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { BatchingConfig } from './config.ts'
import { BatchEngine } from './engine.ts'
import { FakeClock } from './fake-clock.ts'
import type { Batch, ExpireReason } from './types.ts'

interface Item {
  id: number
  group: string
  priority: number
  deadline: number
  enqueuedAt: number
}

type Op =
  | { kind: 'push'; group: string; priority: number; ttl: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'complete'; pick: number; fail: boolean }
  | { kind: 'cancel'; mod: number; rem: number }
  | { kind: 'configure'; patch: Partial<BatchingConfig> }
  | { kind: 'flush' }
  | { kind: 'settle' }

const patchArb: fc.Arbitrary<Partial<BatchingConfig>> = fc.record(
  {
    maxBatchSize: fc.integer({ min: 1, max: 5 }),
    maxDelayMs: fc.integer({ min: 0, max: 8 }),
    policy: fc.constantFrom('eager' as const, 'timer' as const),
    maxQueue: fc.integer({ min: 1, max: 12 }),
  },
  { requiredKeys: [] },
)

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      group: fc.constantFrom('', 'a', 'b'),
      priority: fc.integer({ min: 0, max: 2 }),
      ttl: fc.oneof(fc.integer({ min: 0, max: 15 }), fc.constant(Infinity)),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 12 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('complete' as const), pick: fc.nat(), fail: fc.boolean() }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('cancel' as const),
      mod: fc.integer({ min: 2, max: 4 }),
      rem: fc.integer({ min: 0, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('configure' as const), patch: patchArb }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'flush' as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'settle' as const }) },
)

const before = (a: Item, b: Item): boolean => a.priority > b.priority || (a.priority === b.priority && a.id < b.id)

async function check(initial: BatchingConfig, concurrency: number, ops: Op[]): Promise<void> {
  const clock = new FakeClock(1000)
  const violations: string[] = []
  const accepted = new Map<number, Item>()
  const outcome = new Map<number, 'run' | ExpireReason>()
  const queued = new Map<number, Item>()
  const pending: { resolve(): void; reject(e: unknown): void }[] = []
  let closed = false
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
      const { maxBatchSize, policy } = engine.config
      if (batch.items.length === 0) bad('empty batch')
      if (batch.items.length > maxBatchSize) bad(`batch of ${batch.items.length} > ${maxBatchSize}`)
      if (engine.running > concurrency) bad(`running ${engine.running} > ${concurrency}`)
      if (batch.startedAt !== clock.now()) bad('startedAt is not now')
      batch.items.forEach((it, k) => {
        if (it.group !== batch.group) bad(`group ${it.group} in batch of ${batch.group}`)
        if (it.deadline <= clock.now()) bad(`item ${it.id} ran past its deadline`)
        if (batch.queuedMs[k] !== clock.now() - it.enqueuedAt) bad(`queuedMs of ${it.id}`)
        const prev = batch.items[k - 1]
        if (prev !== undefined && !before(prev, it)) bad('batch not in (priority, arrival) order')
        settleOutcome(it, 'run')
      })
      const first = batch.items[0] as Item
      const last = batch.items[batch.items.length - 1] as Item
      for (const q of queued.values()) {
        if (q.group === batch.group && before(q, last)) bad(`item ${q.id} skipped in its group`)
        if (policy === 'eager' && before(q, first)) bad(`item ${q.id} should have been chosen first`)
      }
      return new Promise<void>((resolve, reject) => pending.push({ resolve, reject }))
    },
    expire: (item, reason) => {
      if (reason === 'deadline' && item.deadline > clock.now()) bad(`item ${item.id} expired early`)
      if (reason === 'closed' && !closed) bad(`item ${item.id} closed before close()`)
      settleOutcome(item, reason)
    },
    onRunError: () => {
      runErrors++
    },
  })

  const checkSync = (): void => {
    if (engine.queued !== queued.size) bad(`queued ${engine.queued} != model ${queued.size}`)
    if (clock.timers.length > 1) bad(`${clock.timers.length} timers armed`)
    if (engine.queued === 0 && clock.timers.length > 0) bad('timer armed with an empty queue')
  }
  const checkSettled = (): void => {
    const { policy, maxBatchSize, maxDelayMs } = engine.config
    const now = clock.now()
    for (const q of queued.values()) {
      if (q.deadline <= now) bad(`item ${q.id} waits past its deadline`)
    }
    if (engine.running >= concurrency) return
    if (policy === 'eager' && queued.size > 0) bad(`eager: ${queued.size} waiting while a slot is free`)
    if (policy === 'timer') {
      for (const group of new Set([...queued.values()].map((q) => q.group))) {
        const items = [...queued.values()].filter((q) => q.group === group)
        if (items.length >= maxBatchSize) bad(`timer: full group ${group} waiting while a slot is free`)
        if (Math.min(...items.map((q) => q.enqueuedAt)) + maxDelayMs <= now) bad(`timer: ripe group ${group} waiting`)
      }
    }
  }

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
        }
        const expected = queued.size < engine.config.maxQueue
        const ok = engine.push({ value: item, deadline: item.deadline, group: item.group, priority: item.priority })
        if (ok !== expected) bad(`push returned ${ok} with ${queued.size}/${engine.config.maxQueue} queued`)
        if (ok) {
          accepted.set(item.id, item)
          queued.set(item.id, item)
        }
        break
      }
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
  })
  const { idle, full, timer } = engine.stats.dispatched
  expect(idle + full + timer).toBe(engine.stats.batches)
  expect(runErrors).toBeLessThanOrEqual(engine.stats.batches)
}

describe('BatchEngine properties', () => {
  it('exactly-once, batch bounds, group uniformity, ordering and no idle waiting', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          maxBatchSize: fc.integer({ min: 1, max: 5 }),
          maxDelayMs: fc.integer({ min: 0, max: 8 }),
          policy: fc.constantFrom('eager' as const, 'timer' as const),
          maxQueue: fc.integer({ min: 1, max: 12 }),
        }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(opArb, { maxLength: 80 }),
        check,
      ),
      { numRuns: 1000 },
    )
  }, 60_000)
})
