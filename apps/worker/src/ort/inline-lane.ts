import { statSync } from 'node:fs'
import * as ort from 'onnxruntime-node'
import type { HostTensor, RunResult } from './ort-pool.ts'

/**
 * Default `inlineRunMs` of an ONNX runner: a batch predicted to run in at most this many ms runs
 * on the calling thread (docs/architecture.md#the-inline-lane). A hand-off to an ORT thread and
 * back wakes two sleeping threads (docs/bench/hot-path-4-2026-12-02.md): next to a run of a quarter
 * of a millisecond or more that is cheap, below it it is most of the run.
 */
export const DEFAULT_INLINE_RUN_MS = 0.25

/**
 * Models bigger than this file size never get an inline session (a second copy of the weights
 * in the main thread): a model this large does not run a batch in a quarter of a millisecond.
 */
export const INLINE_MAX_MODEL_BYTES = 32 * 1024 * 1024

/** Runs remembered per size bucket: the prediction is their fastest. */
const WINDOW = 8

/** Power-of-two bucket of a batch of `rows` rows (1, 2, 4, ...). */
function bucketOf(rows: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, rows)))
}

/** The last runs of one size bucket. */
interface Bucket {
  ms: number[]
  rows: number[]
  next: number
}

/**
 * The predicted compute time of a batch by its row count: the fastest of the last 8 runs seen in
 * its power-of-two size bucket (a run's wall time only grows when the thread is preempted or
 * waits, so the fastest is the closest to its compute; a model that got slower shows in 8 runs).
 * A bucket never seen is predicted from the largest smaller one seen, scaled by rows (per-row cost
 * falls as batches grow, so this errs towards the pool); with no run seen at all, `undefined`.
 */
export class RunTimes {
  readonly #buckets = new Map<number, Bucket>()

  /** A batch of `rows` rows ran in `ms` (as the session's caller timed it). */
  observe(rows: number, ms: number): void {
    const b = bucketOf(rows)
    let seen = this.#buckets.get(b)
    if (seen === undefined) {
      seen = { ms: [], rows: [], next: 0 }
      this.#buckets.set(b, seen)
    }
    seen.ms[seen.next] = ms
    seen.rows[seen.next] = rows
    seen.next = (seen.next + 1) % WINDOW
  }

  /** Predicted ms for a batch of `rows` rows, or undefined before any run. */
  predict(rows: number): number | undefined {
    const b = bucketOf(rows)
    const exact = this.#buckets.get(b)
    if (exact !== undefined) {
      return Math.min(...exact.ms)
    }
    let below: Bucket | undefined
    let at = 0
    for (const [k, v] of this.#buckets) {
      if (k < b && k > at) {
        at = k
        below = v
      }
    }
    if (below === undefined) {
      return undefined
    }
    let perRow = Infinity
    below.ms.forEach((ms, i) => (perRow = Math.min(perRow, ms / Math.max(1, below.rows[i] ?? 1))))
    return perRow * rows
  }
}

/**
 * A second ORT session of the model on the calling (main) thread: one intra-op thread, no
 * spinning, so a run costs no thread wake-up. onnxruntime-node runs it in a `setImmediate` on
 * this thread. A run's `computeMs` is the smaller of its wall and process CPU time (so a loaded
 * machine does not push a microsecond model off the lane), the CPU time read only around a run
 * that follows one whose wall time was over the caller's `cpuCheckMs`. Only for CPU; a run here cannot be stopped or timed out, which is why only
 * batches predicted to take at most `inlineRunMs` come here.
 */
/**
 * Least ms between two runs whose CPU time is read (`InlineLane.open`'s `cpuCheckEveryMs`): each
 * bucket's prediction is the least of its recent runs, so one corrected run in a window corrects it.
 */
const CPU_CHECK_EVERY_MS = 25

export class InlineLane {
  readonly #session: ort.InferenceSession

  readonly #cpuCheckEveryMs: number

  private constructor(session: ort.InferenceSession, cpuCheckEveryMs: number) {
    this.#session = session
    this.#cpuCheckEveryMs = cpuCheckEveryMs
  }

  /** Load `path` in a single-thread session on this thread; undefined when the file is too large to be worth a second copy. */
  static async open(path: string, o: { cpuCheckEveryMs?: number } = {}): Promise<InlineLane | undefined> {
    if (statSync(path).size > INLINE_MAX_MODEL_BYTES) {
      return undefined
    }
    const session = await ort.InferenceSession.create(path, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      extra: { session: { intra_op: { allow_spinning: '0' } } },
    })
    return new InlineLane(session, o.cpuCheckEveryMs ?? CPU_CHECK_EVERY_MS)
  }

  /** Read the process's CPU time around the next run (set by a run whose wall time was over `cpuCheckMs`). */
  #cpuNext = true
  /** When the last run with a CPU reading started (performance.now() ms). */
  #cpuAt = Number.NEGATIVE_INFINITY

  /**
   * Run one batch here; outputs as the pool returns them. `cpuCheckMs`: a run whose wall time is
   * over it has the process CPU time read around the next run (see the class's documentation).
   */
  async run(feeds: Record<string, HostTensor>, cpuCheckMs = 0): Promise<RunResult> {
    const input: Record<string, ort.Tensor> = {}
    for (const [name, f] of Object.entries(feeds)) {
      input[name] = Array.isArray(f.data) ? new ort.Tensor('string', f.data, f.dims) : new ort.Tensor(f.type as 'float32', f.data as Float32Array, f.dims)
    }
    // Two getrusage calls per run were 1.9% of cohort serve's main thread at saturation (issue
    // 28): read only after a run that a loaded machine may have stretched. A stretched run
    // reports its wall time; the next one reports the smaller of wall and CPU, and the lane's
    // prediction is the least of its recent runs (RunTimes), so one corrected run corrects it.
    const c0 = this.#cpuNext ? process.cpuUsage() : undefined
    const t0 = performance.now()
    const out = await this.#session.run(input)
    const wall = performance.now() - t0
    let computeMs = wall
    if (c0 !== undefined) {
      // The smaller of wall and process CPU time: a loaded machine stretches the wall time (the
      // wait for onnxruntime-node's setImmediate, preemption), other threads' work the CPU time;
      // the run itself is in both (a CPU reading of 0, below the clock's resolution, is not trusted).
      const cpu = process.cpuUsage(c0)
      const cpuMs = (cpu.user + cpu.system) / 1000
      computeMs = cpuMs > 0 ? Math.min(wall, cpuMs) : wall
    }
    // At most one read per CPU_CHECK_EVERY_MS: under load getrusage took 27 µs a call here (it
    // sums every thread of the process; 0.3 µs idle), 1% of cohort serve's CPU at saturation.
    if (c0 !== undefined) {
      this.#cpuAt = t0
    }
    this.#cpuNext = wall > cpuCheckMs && t0 - this.#cpuAt >= this.#cpuCheckEveryMs
    const outputs: Record<string, HostTensor> = {}
    for (const [name, t] of Object.entries(out)) {
      outputs[name] = { type: t.type, dims: [...t.dims], data: t.data }
    }
    return { outputs, computeMs }
  }

  close(): Promise<void> {
    return this.#session.release()
  }
}
