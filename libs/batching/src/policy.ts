/**
 * Dispatch decisions as pure functions of the queue, the configuration and the time.
 * @module
 */
import type { BatchingConfig } from './config.ts'
import { oldestEnqueuedAt, type GroupedQueue } from './queue.ts'
import type { DispatchReason } from './types.ts'

/**
 * The group to dispatch next, assuming a slot is free, or `undefined` when none may go now.
 * Eager: the group of the best queued item (highest priority, then oldest). Timer: the same, but
 * only among groups that hold `maxBatchSize` items or whose oldest item has waited `maxDelayMs`.
 */
export function pickGroup(
  queue: GroupedQueue<unknown>,
  config: Readonly<BatchingConfig>,
  now: number,
): string | undefined {
  const { policy, maxBatchSize, maxDelayMs } = config
  if (policy === 'eager') {
    return queue.pick()
  }
  return queue.pick((items) => items.length >= maxBatchSize || oldestEnqueuedAt(items) + maxDelayMs <= now)
}

/** Reason recorded for a batch of `size` items: `'full'` at `maxBatchSize`, else by policy. */
export function dispatchReason(size: number, config: Readonly<BatchingConfig>): DispatchReason {
  if (size >= config.maxBatchSize) {
    return 'full'
  }
  return config.policy === 'eager' ? 'idle' : 'timer'
}

/**
 * The next instant the engine must wake up by itself: the earliest queued deadline and, under
 * `'timer'` while a slot is free, the earliest instant a group's oldest item has waited
 * `maxDelayMs`. `Infinity` when nothing needs a timer (including an empty queue).
 */
export function nextWake(queue: GroupedQueue<unknown>, config: Readonly<BatchingConfig>, slotFree: boolean): number {
  let at = queue.earliestDeadline()
  if (config.policy === 'timer' && slotFree) {
    for (const items of queue.groups()) {
      at = Math.min(at, oldestEnqueuedAt(items) + config.maxDelayMs)
    }
  }
  return at
}
