/**
 * Test helper (not exported from the package): a `BatchEngine` on a `FakeClock` whose `run`
 * records each batch and stays pending until the test completes or fails it.
 * @module
 */
import { BatchEngine } from './engine.ts'
import { FakeClock } from './fake-clock.ts'
import type { Batch, BatchEngineOptions, ExpireReason } from './types.ts'

/** A recorded `run` call. */
export interface RunCall<T> {
  readonly batch: Batch<T>
  /** Engine time when `run` was called. */
  readonly at: number
  /** True once completed or failed by the test. */
  done: boolean
  resolve(): void
  reject(err: Error): void
}

/** The engine under test plus everything it reported. */
export interface Harness<T> {
  readonly clock: FakeClock
  readonly engine: BatchEngine<T>
  readonly runs: RunCall<T>[]
  readonly expired: [T, ExpireReason][]
  readonly runErrors: [unknown, Batch<T>][]
  /** Item lists of every batch, in dispatch order. */
  items(): T[][]
  /** Runs not yet completed or failed. */
  pending(): RunCall<T>[]
  /** Resolve the oldest pending run (or run `i`), then `settle()`. */
  complete(i?: number): Promise<void>
  /** Reject the oldest pending run with `err`, then `settle()`. */
  fail(err: Error): Promise<void>
}

/** Build a harness; `opts` override the engine options (default: a fake clock at t=0). */
export function harness<T = string>(opts: Partial<BatchEngineOptions<T>> & { start?: number } = {}): Harness<T> {
  const clock = new FakeClock(opts.start ?? 0)
  const runs: RunCall<T>[] = []
  const expired: [T, ExpireReason][] = []
  const runErrors: [unknown, Batch<T>][] = []
  const engine = new BatchEngine<T>({
    clock,
    run: (batch) =>
      new Promise<void>((resolve, reject) => {
        const call: RunCall<T> = {
          batch,
          at: clock.now(),
          done: false,
          resolve: () => {
            call.done = true
            resolve()
          },
          reject: (err) => {
            call.done = true
            reject(err)
          },
        }
        runs.push(call)
      }),
    expire: (value, reason) => {
      expired.push([value, reason])
    },
    onRunError: (err, batch) => {
      runErrors.push([err, batch])
    },
    ...opts,
  })
  const pending = (): RunCall<T>[] => runs.filter((r) => !r.done)
  const take = (i?: number): RunCall<T> => {
    const call = i === undefined ? pending()[0] : runs[i]
    if (call === undefined || call.done) {
      throw new Error(`no pending run ${i ?? ''}`)
    }
    return call
  }
  return {
    clock,
    engine,
    runs,
    expired,
    runErrors,
    items: () => runs.map((r) => r.batch.items),
    pending,
    complete: async (i) => {
      take(i).resolve()
      await clock.settle()
    },
    fail: async (err) => {
      take().reject(err)
      await clock.settle()
    },
  }
}

/** Push values with no deadline into `h.engine` (same group, priority 0). */
export function pushAll<T>(h: Harness<T>, ...values: T[]): void {
  for (const value of values) {
    if (!h.engine.push({ value, deadline: Infinity })) {
      throw new Error(`push refused: ${String(value)}`)
    }
  }
}
