import { realClock, type BatchingConfig, type Clock } from '@cohort/batching'
import { ItemError } from '@cohort/predictor'
import { leafStages } from './define.ts'
import type { PipelineMetrics } from './metrics.ts'
import { StageQueue, inProcessRunner, toItemError, type StageRunner } from './stage-queue.ts'
import type { LeafStage, Pipeline } from './types.ts'

/** Options of {@link PipelineExecutor}. */
export interface PipelineExecutorOptions {
  pipeline: Pipeline
  /**
   * The runner of a leaf stage. Return undefined to run a TS stage in this process; ONNX stages
   * and remote stages need one from the host. @default every stage in process
   */
  runnerFor?(stage: LeafStage): StageRunner | undefined
  /** Time source of deadlines and the stages' batch engines. @default realClock */
  clock?: Clock
  /** Per-stage metrics. @default none */
  metrics?: PipelineMetrics
  /** Batching overrides for every stage (policy, maxQueue, ...), over each stage's `batch`. */
  batching?: Partial<BatchingConfig>
  /** Batching overrides per stage name, over `batching`. */
  stageBatching?: Record<string, Partial<BatchingConfig>>
  /**
   * Backpressure bound per stage name, in batches (see `StageFlowConfig.maxInflight`), over the
   * stage's own. @default each stage's `maxInflight` (Infinity: none)
   */
  maxInflight?: Record<string, number>
}

/**
 * Runs items through a pipeline's stages. Each leaf stage has its own batch engine and runner, so
 * stages work concurrently: while one stage runs batch k, the stage before it prepares batch k+1.
 * Every item carries its end-to-end deadline: it is answered DEADLINE_EXCEEDED (504) as soon as
 * the deadline passes, and no later stage runs it. A failed item fails alone.
 */
export class PipelineExecutor {
  readonly pipeline: Pipeline
  readonly #queues = new Map<string, StageQueue>()
  readonly #runners: StageRunner[] = []
  readonly #clock: Clock
  readonly #abort = new AbortController()
  #closing: Promise<void> | undefined

  constructor(o: PipelineExecutorOptions) {
    this.pipeline = o.pipeline
    this.#clock = o.clock ?? realClock
    for (const s of leafStages(o.pipeline)) {
      const runner = o.runnerFor?.(s) ?? inProcessRunner(s)
      this.#runners.push(runner)
      this.#queues.set(
        s.name,
        new StageQueue({
          pipeline: o.pipeline.name,
          stage: s,
          runner,
          clock: this.#clock,
          signal: this.#abort.signal,
          metrics: o.metrics,
          batching: { ...o.batching, ...o.stageBatching?.[s.name] },
          maxInflight: o.maxInflight?.[s.name],
        }),
      )
    }
    // Backpressure: each leaf stage's batches wait for room in the leaf stage after it.
    const order = [...this.#queues.values()]
    order.forEach((q, i) => (q.next = order[i + 1]))
    o.metrics?.queueDepth.collect(() => [...this.#queues].map(([stage, q]) => [{ pipeline: o.pipeline.name, stage }, q.engine.queued]))
  }

  /** Start every stage runner (load models, run setups). */
  async start(): Promise<void> {
    await Promise.all(this.#runners.map((r) => r.start?.() ?? Promise.resolve()))
  }

  /** The queue of a leaf stage (for stats). */
  stage(name: string): StageQueue {
    const q = this.#queues.get(name)
    if (!q) {
      throw new RangeError(`pipeline ${this.pipeline.name} has no stage "${name}"`)
    }
    return q
  }

  /**
   * Run one (validated) item through every stage. Resolves with the output or an `ItemError`
   * (never rejects). `deadline` is epoch ms; the pipeline's `deadlineMs` tightens it.
   */
  async run(input: unknown, deadline: number): Promise<unknown> {
    return (await this.runMany([input], deadline))[0]
  }

  /**
   * Run items that share a deadline (one request's) through every stage: one result or
   * `ItemError` per item, in order (never rejects). They travel together through each stage's
   * queue (and share batches with other requests'); a failed item leaves the group alone.
   */
  async runMany(inputs: readonly unknown[], deadline: number): Promise<unknown[]> {
    const now = this.#clock.now()
    if (this.pipeline.deadlineMs !== undefined) {
      deadline = Math.min(deadline, now + this.pipeline.deadlineMs)
    }
    const out: unknown[] = new Array(inputs.length)
    if (this.#closing) {
      const err = new ItemError(`pipeline ${this.pipeline.name} is closed`, 'SHUTTING_DOWN')
      return out.fill(err)
    }
    // Indices of the items still going, and their current values.
    let live = inputs.map((_, i) => i)
    let vals: unknown[] = [...inputs]
    for (const s of this.pipeline.stages) {
      if (live.length === 0) {
        break
      }
      if (this.#clock.now() >= deadline) {
        const err = deadlineError(s.name)
        live.forEach((i) => (out[i] = err))
        return out
      }
      const nextLive: number[] = []
      const nextVals: unknown[] = []
      const keep = (i: number, v: unknown) => {
        if (v instanceof Error) {
          out[i] = toItemError(v)
        } else {
          nextLive.push(i)
          nextVals.push(v)
        }
      }
      if (s.kind === 'fanOut') {
        // Each item split (its index, its value, its sub-items).
        const owned: { i: number; v: unknown; parts: unknown[] }[] = []
        live.forEach((i, k) => {
          try {
            const v = vals[k]
            const p = s.split(v)
            if (!Array.isArray(p)) {
              throw new TypeError(`fanOut ${s.name}: split must return an array`)
            }
            owned.push({ i, v, parts: p })
          } catch (e) {
            out[i] = toItemError(e)
          }
        })
        const rs = await this.stage(s.stage.name).submitMany(allParts(owned), deadline)
        if (this.#clock.now() >= deadline) {
          const err = deadlineError(s.name)
          owned.forEach((o) => (out[o.i] = err))
          return out
        }
        let at = 0
        for (const o of owned) {
          const mine = rs.slice(at, (at += o.parts.length))
          try {
            keep(o.i, s.merge(o.v, mine))
          } catch (e) {
            out[o.i] = toItemError(e)
          }
        }
      } else {
        const rs = await this.stage(s.name).submitMany(vals, deadline)
        if (!rs.some((r) => r instanceof Error)) {
          // Every item goes on: the stage's results are the next stage's batch, as they are.
          vals = rs
          continue
        }
        live.forEach((i, k) => keep(i, rs[k]))
      }
      live = nextLive
      vals = nextVals
    }
    if (live.length === inputs.length) {
      return vals
    }
    live.forEach((i, k) => (out[i] = vals[k]))
    return out
  }

  /** Stop taking items, answer queued ones SHUTTING_DOWN, release runners. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const q of this.#queues.values()) {
        q.engine.close()
      }
      await Promise.all([...this.#queues.values()].map((q) => q.engine.idle()))
      this.#abort.abort()
      await Promise.allSettled(this.#runners.map((r) => r.close?.() ?? Promise.resolve()))
    })()
    return this.#closing
  }
}

function deadlineError(stage: string): ItemError {
  return new ItemError(`deadline passed before stage ${stage}; the item was not run further`, 'DEADLINE_EXCEEDED')
}

/** Every item's sub-items end to end, by a loop (`flatMap` costs several times as much per item). */
function allParts(owned: readonly { parts: unknown[] }[]): unknown[] {
  const parts: unknown[] = []
  for (const o of owned) {
    for (const part of o.parts) {
      parts.push(part)
    }
  }
  return parts
}
