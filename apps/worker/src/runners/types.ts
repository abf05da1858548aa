import { Deadlines, monotonicNow, type Deadlined } from '@cohort/batching'
import type { Registry } from '@cohort/metrics'
import { CohortError, type InferRequest, type ModelMeta, type Subjects, type WireError, type WireTensor } from '@cohort/protocol'

/** One item of a request, ready for the batch engine (or already failed). */
export interface PreparedItem {
  /** Items of different groups never share a batch (e.g. different non-batch shapes). */
  group: string
  /** Cost units of the item (tokens, pixels) for the batch cost budget. @default 1 */
  cost?: number
  /** Runner-specific data for `runBatch`. */
  payload: unknown
  /** Set when the item failed validation: it is answered without running. */
  error?: WireError
}

/** The result of one item: output tensors (one row each), a JSON output, or an error. */
export type ItemResult = { tensors: Record<string, WireTensor> } | { json: unknown } | { error: WireError }

/** Runs one model's batches. Implemented for ONNX files and TypeScript predictors. */
export interface ModelRunner {
  readonly name: string
  /** Concurrent batches the runner can take (ORT instances). */
  readonly concurrency: number
  /**
   * The model's own batching defaults. `autoBatchSize`: tune the batch cap within
   * `[1, maxBatchSize]` (@default false). `maxBatchCost`: the batch cost budget of the model's
   * items (@default the engine's, unlimited).
   */
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number; autoBatchSize?: boolean; maxBatchCost?: number }
  /**
   * A hard batch limit of the model itself (known once started), e.g. a leading dimension fixed at
   * 1: flags and runtime overrides may not exceed it. Absent: only `@cohort/batching`'s bound.
   */
  readonly batchLimit?: { maxBatchSize: number; reason: string } | undefined
  /** Load and warm up. */
  start(): Promise<void>
  /** Register the runner's own metrics (ONNX Runtime instances) in the worker's registry; called once, before `start`. */
  instrument?(registry: Registry): void
  meta(): ModelMeta
  /** Validate a request and split it into items. Throws CohortError for request-level faults. */
  prepare(req: InferRequest): PreparedItem[]
  /**
   * Run one batch: one result per payload, in order. A throw fails every item of the batch.
   * A runner that supports `opts.timeoutMs` fails a batch past it with BATCH_TIMEOUT and replaces
   * what ran it (docs/reliability.md#batch-time-limit).
   */
  runBatch(payloads: unknown[], signal: AbortSignal, opts?: RunBatchOptions): Promise<ItemResult[]>
  /** Receive the runner's restart events (metrics, logs). */
  observe?(events: RunnerEvents): void
  close(): Promise<void>
  /**
   * The subjects the runner is served on, from the worker's (a pipeline stage answers on
   * `cohort.stage.<pipeline>.<stage>`). @default the model's subjects
   */
  subjects?(base: Subjects): Subjects
  /** Announce the runner in the model directory (false for pipeline stages). @default true */
  readonly announce?: boolean
}

/** Options of one {@link ModelRunner.runBatch} call. */
export interface RunBatchOptions {
  /** Time limit of the batch in ms (0 or absent: none). */
  timeoutMs?: number
  /**
   * Work waiting behind this batch when it was dispatched: items left in the batcher's queue plus
   * the other batches running. An ONNX runner runs a batch on its inline lane only when this is 0,
   * so that a backlog keeps the main thread free for the next requests while the pool runs this
   * one (docs/architecture.md#the-inline-lane).
   * @default 0
   */
  behind?: number
  /**
   * Filled by a runner that times the executor itself: `computeMs`, the batch's time inside the
   * model (an ONNX Runtime thread's `session.run`), without the calling thread's queueing
   * (`Batch.serviceMs` of @cohort/batching).
   */
  measured?: { computeMs?: number }
}

/** Why a runner (or one of its instances) was replaced. */
export type RestartReason = 'batch_timeout' | 'died'

/** What a runner reports about its restarts. */
export interface RunnerEvents {
  /** A thread or process is being replaced; the model reports not ready until it is back (when it was the only one). */
  restarting(reason: RestartReason, detail: string): void
  /** The replacement is up (setup done, model loaded) after `ms`. */
  restarted(reason: RestartReason, ms: number): void
  /** A replacement failed to start; it is tried again after `retryMs`. */
  restartFailed(reason: RestartReason, err: unknown, retryMs: number): void
}

/** One batch's limit in {@link TimeLimits}. */
interface Limit extends Deadlined {
  expire(): void
}

/**
 * Batches' time limits on one timer ({@link Deadlines}): a runner's batches, one after another,
 * create no timer each (issue 28's budgets), where a `setTimeout` and a `Promise.race` per batch did.
 */
export class TimeLimits {
  readonly #d = new Deadlines<Limit>((l) => l.expire())

  /** Reject with BATCH_TIMEOUT (504) when `p` has not settled within `ms`, then run `onTimeout`. */
  run<T>(p: Promise<T>, ms: number | undefined, what: string, onTimeout: () => void): Promise<T> {
    if (!(ms !== undefined && ms > 0 && Number.isFinite(ms))) {
      return p
    }
    return new Promise<T>((resolve, reject) => {
      let expired = false
      const l: Limit = {
        deadline: monotonicNow() + ms,
        heapIndex: -1,
        expire: () => {
          expired = true
          reject(new CohortError('BATCH_TIMEOUT', `${what} ran past its time limit of ${Math.round(ms)} ms; it was stopped and its runner restarted`))
          onTimeout()
        },
      }
      this.#d.add(l)
      // Settled in time: resolving with `p` itself takes its value or its very rejection reason.
      const settled = () => {
        if (!expired) {
          this.#d.remove(l)
          resolve(p)
        }
      }
      p.then(settled, settled)
    })
  }

  /** Forget every limit and stop the timer. Idempotent. */
  close(): void {
    this.#d.close()
  }
}
