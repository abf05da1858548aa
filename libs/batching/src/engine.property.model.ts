/**
 * Test helper for `engine.property.test.ts` (not exported from the package): the model of a queued
 * item, the random operations, and the orders and caps the engine must respect.
 * @module
 */
import fc from 'fast-check'
import type { BatchingConfig } from './config.ts'

export interface Item {
  id: number
  group: string
  priority: number
  deadline: number
  enqueuedAt: number
  cost: number
}

export type Op =
  | { kind: 'push'; group: string; priority: number; ttl: number; cost: number }
  | { kind: 'observe'; size: number; ms: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'complete'; pick: number; fail: boolean }
  | { kind: 'cancel'; mod: number; rem: number }
  | { kind: 'configure'; patch: Partial<BatchingConfig> }
  | { kind: 'flush' }
  | { kind: 'settle' }

export const patchArb: fc.Arbitrary<Partial<BatchingConfig>> = fc.record(
  {
    maxBatchSize: fc.integer({ min: 1, max: 5 }),
    maxDelayMs: fc.integer({ min: 0, max: 8 }),
    policy: fc.constantFrom('eager' as const, 'timer' as const, 'deadline' as const),
    maxQueue: fc.integer({ min: 1, max: 12 }),
    maxBatchCost: fc.oneof(fc.constant(Infinity), fc.integer({ min: 1, max: 6 })),
    admission: fc.boolean(),
    autoBatchSize: fc.boolean(),
  },
  { requiredKeys: [] },
)

export const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      group: fc.constantFrom('', 'a', 'b'),
      priority: fc.integer({ min: 0, max: 2 }),
      ttl: fc.oneof(fc.integer({ min: 0, max: 15 }), fc.constant(Infinity)),
      cost: fc.constantFrom(1, 1, 1, 2, 3),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('observe' as const),
      size: fc.integer({ min: 1, max: 6 }),
      ms: fc.integer({ min: 0, max: 6 }),
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

/** The eager and timer order: priority, then arrival. */
export const before = (a: Item, b: Item): boolean => a.priority > b.priority || (a.priority === b.priority && a.id < b.id)
/** The deadline policy's order: priority, then deadline, then arrival. */
export const edfBefore = (a: Item, b: Item): boolean =>
  a.priority > b.priority || (a.priority === b.priority && (a.deadline < b.deadline || (a.deadline === b.deadline && a.id < b.id)))
export const costOf = (items: readonly Item[]): number => items.reduce((sum, it) => sum + it.cost, 0)
/** True when the group's best items (in `order`) fill a batch (count or cost cap). */
export function groupFull(items: Item[], config: { maxBatchSize: number; maxBatchCost: number }, order: (a: Item, b: Item) => boolean): boolean {
  const sorted = [...items].sort((a, b) => (order(a, b) ? -1 : 1))
  let cost = 0
  for (let n = 0; n < sorted.length; n++) {
    if (n >= config.maxBatchSize) return true
    const next = (sorted[n] as Item).cost
    if (n > 0 && cost + next > config.maxBatchCost) return true
    cost += next
  }
  return sorted.length >= config.maxBatchSize || cost >= config.maxBatchCost
}
