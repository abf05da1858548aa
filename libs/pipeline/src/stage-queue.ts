import { BatchEngine, type Batch, type BatchingConfig, type Clock, type ExpireReason, type QueueEntry } from '@cohort/batching'
import { isErrorCode, toWireError, type ErrorCode } from '@cohort/protocol'
import { ItemError } from '@cohort/predictor'
import type { PipelineMetrics } from './metrics.ts'
import { sameTensorLayout, tensorGroupKey } from './tensors.ts'
import type { LeafStage, StageContext } from './types.ts'

/**
 * How one stage's batches are computed: in process (a TS stage), in an ORT session (the host's
 * ONNX adapter), or on another worker (the host's remote client). The executor batches; the
 * runner only runs.
 */
export interface StageRunner {
  /** Batches that may run at once (ORT instances; in-flight remote batches). */
  readonly concurrency: number
  start?(): Promise<void>
  /** One result per item, in order (each a value or an Error); an Error fails that item; a throw fails the batch. */
  run(items: unknown[], ctx: StageContext): Promise<unknown[]>
  close?(): Promise<void>
}

/** Runs a TS stage in this process. */
export function inProcessRunner(stage: LeafStage): StageRunner {
  if (stage.kind !== 'ts') {
    throw new TypeError(`stage "${stage.name}" is an ONNX stage: the host must give its runner`)
  }
  return {
    concurrency: stage.instances ?? 1,
    start: async () => {
      await stage.setup?.()
    },
    run: async (items, ctx) => stage.run(items, ctx),
  }
}

/** An item failure with a registered code (ItemError keeps the code across processes). */
export function toItemError(e: unknown, fallback: ErrorCode = 'PREDICTOR_FAILED'): ItemError {
  if (e instanceof ItemError) {
    return e
  }
  const code = (e as { code?: unknown } | null)?.code
  const w = toWireError(e, fallback)
  return new ItemError(w.message, isErrorCode(code) ? code : isErrorCode(w.code) ? w.code : fallback)
}

/** [0, 1, ..., n - 1]. */
function identity(n: number): number[] {
  const a = new Array<number>(n)
  for (let i = 0; i < n; i++) {
    a[i] = i
  }
  return a
}

const EXPIRED: Record<ExpireReason, { code: ErrorCode; msg: string }> = {
  deadline: { code: 'DEADLINE_EXCEEDED', msg: 'deadline passed while queued; the stage did not run it' },
  doomed: { code: 'DEADLINE_EXCEEDED', msg: 'the item could not finish this stage before its deadline, so it was not run' },
  cancelled: { code: 'CANCELLED', msg: 'cancelled before the stage ran it' },
  closed: { code: 'SHUTTING_DOWN', msg: 'the pipeline closed before the stage ran it' },
}

/** One engine entry: a chunk of items submitted together (same deadline, same group). */
interface Job {
  values: unknown[]
  deadline: number
  resolve(results: unknown[]): void
}

/** Options of {@link StageQueue}. */
export interface StageQueueOptions {
  pipeline: string
  stage: LeafStage
  runner: StageRunner
  clock: Clock
  signal: AbortSignal
  metrics?: PipelineMetrics | undefined
  batching?: Partial<BatchingConfig> | undefined
  /** Backpressure bound in batches (× maxBatchSize items), over the stage's `maxInflight`. @default stage.maxInflight */
  maxInflight?: number | undefined
}

/**
 * One stage's own batch engine in front of its runner. Items submitted together travel as chunks
 * (one engine entry per group and per `maxBatchSize` items, the entry's cost = its item count,
 * `maxBatchCost` = `maxBatchSize`), so a request of n items costs a few queue operations, not n.
 * A stage with a `cost()` function queues items one by one with their own costs instead.
 */
export class StageQueue {
  readonly engine: BatchEngine<Job>
  /** Items handed to the runner. */
  ran = 0
  /**
   * How submissions entered the stage: `direct`, batches that ran at once, unqueued (the stage was
   * idle and what arrived together fit one batch); `queued`, engine entries queued (the stage was
   * busy, or they did not fit one batch).
   */
  readonly passes = { direct: 0, queued: 0, held: 0 }
  /** Items submitted to the stage and not answered yet (queued or running). */
  inflight = 0
  /**
   * The stage after this one: each batch of this stage waits until that stage has room (its
   * `inflight` below its bound) before it runs. Set by the executor.
   */
  next: StageQueue | undefined
  /** Items this stage holds before the stage ahead of it waits: maxInflight × maxBatchSize. */
  readonly maxInflightItems: number
  #roomWaiters: (() => void)[] = []
  #pending: QueueEntry<Job>[] = []
  #flushQueued = false
  readonly #o: StageQueueOptions
  readonly #labels: { pipeline: string; stage: string }
  /** Items per chunk: maxBatchSize, or 1 when items carry their own costs. */
  readonly #chunk: number

  constructor(o: StageQueueOptions) {
    this.#o = o
    this.#labels = { pipeline: o.pipeline, stage: o.stage.name }
    const maxBatchSize = o.batching?.maxBatchSize ?? o.stage.batch.maxBatchSize
    const costed = o.stage.kind === 'ts' && o.stage.cost !== undefined
    this.#chunk = costed ? 1 : maxBatchSize
    const maxInflight = o.maxInflight ?? o.stage.maxInflight
    if (!(maxInflight === Infinity || (Number.isInteger(maxInflight) && maxInflight >= 1))) {
      throw new RangeError(`stage ${o.stage.name}: maxInflight must be an integer >= 1 or Infinity, got ${maxInflight}`)
    }
    this.maxInflightItems = maxInflight * maxBatchSize
    this.engine = new BatchEngine<Job>({
      maxDelayMs: o.stage.batch.maxDelayMs,
      // Admission at enqueue judges each arrival against the whole queue: a burst of n entries
      // costs O(n^2). Stages rely on expiry and early drops at dispatch instead (override to turn it on).
      admission: false,
      ...o.batching,
      maxBatchSize,
      ...(costed ? {} : { maxBatchCost: o.batching?.maxBatchCost ?? maxBatchSize }),
      concurrency: o.runner.concurrency,
      clock: o.clock,
      run: (b) => this.#run(b),
      expire: (job, reason) => {
        const e = EXPIRED[reason]
        this.#count(e.code, job.values.length)
        const err = new ItemError(`stage ${o.stage.name}: ${e.msg}`, e.code)
        job.resolve(job.values.map(() => err))
      },
    })
  }

  /** Queue one item; resolves with its result or an Error. */
  async submit(value: unknown, deadline: number): Promise<unknown> {
    return (await this.submitMany([value], deadline))[0]
  }

  /** Queue items that share a deadline; resolves with one result or Error per item, in order. */
  async submitMany(values: unknown[], deadline: number): Promise<unknown[]> {
    const s = this.#o.stage
    const out: unknown[] = new Array(values.length)
    const groups = new Map<string, number[]>()
    const costs: number[] = []
    if (s.kind === 'ts' && s.group === undefined && s.cost === undefined) {
      // One group, unit costs: no per-item work before the stage.
      groups.set('', identity(values.length))
    } else {
      this.#group(values, groups, costs, out)
    }
    // One engine entry per group and chunk, handed to the stage at the end of this microtask run.
    const entries: QueueEntry<Job>[] = []
    const waits: Promise<void>[] = []
    for (const [group, idx] of groups) {
      for (let at = 0; at < idx.length; at += this.#chunk) {
        const piece = at === 0 && idx.length <= this.#chunk ? idx : idx.slice(at, at + this.#chunk)
        waits.push(
          new Promise<void>((resolve) => {
            this.inflight += piece.length
            const job: Job = {
              values: piece.length === values.length ? values : piece.map((i) => values[i]),
              deadline,
              resolve: (rs) => {
                this.#release(piece.length)
                if (piece.length === out.length) {
                  // The whole submission, in order (one group, no invalid item).
                  for (let k = 0; k < rs.length; k++) {
                    out[k] = rs[k]
                  }
                } else {
                  piece.forEach((i, k) => {
                    out[i] = rs[k]
                  })
                }
                resolve()
              },
            }
            const first = piece[0]
            const cost = this.#chunk === 1 && first !== undefined ? (costs[first] ?? 1) : piece.length
            entries.push({ value: job, deadline, group, cost })
          }),
        )
      }
    }
    this.#enqueue(entries)
    await (waits.length === 1 ? waits[0] : Promise.all(waits))
    return out
  }

  /** True while the stage holds fewer items than its backpressure bound. */
  get hasRoom(): boolean {
    return this.inflight < this.maxInflightItems
  }

  /** Resolves once the stage has room (at once when it has). */
  room(): Promise<void> | undefined {
    return this.hasRoom ? undefined : new Promise<void>((resolve) => this.#roomWaiters.push(resolve))
  }

  #release(n: number): void {
    this.inflight -= n
    while (this.hasRoom) {
      const wake = this.#roomWaiters.shift()
      if (wake === undefined) {
        break
      }
      wake()
    }
  }

  /** Batch group (and cost) of each item; an item whose key or cost throws fails alone (`out`). */
  #group(values: unknown[], groups: Map<string, number[]>, costs: number[], out: unknown[]): void {
    const s = this.#o.stage
    // ONNX items of one submission usually share their layout: compute the key once, then compare.
    let prev: unknown
    let prevKey = ''
    values.forEach((v, i) => {
      try {
        let g: string
        if (s.kind === 'onnx') {
          g = prev !== undefined && sameTensorLayout(v, prev) ? prevKey : tensorGroupKey(v)
          prev = v
          prevKey = g
        } else {
          g = s.group?.(v) ?? ''
        }
        costs[i] = s.kind === 'ts' && s.cost ? s.cost(v) : 1
        const list = groups.get(g)
        if (list) {
          list.push(i)
        } else {
          groups.set(g, [i])
        }
      } catch (e) {
        out[i] = toItemError(e, 'INVALID_INPUT')
      }
    })
  }

  /**
   * Entries submitted in this run of microtasks are handed over together at its end (a
   * microtask, not an event-loop turn): the requests of one finished batch reach the next stage
   * together. If the stage is idle and they fit one batch they run at once as that batch
   * (`BatchEngine.runNow`: no queue entry, no deferred dispatch); otherwise they are queued.
   */
  #enqueue(entries: QueueEntry<Job>[]): void {
    for (const e of entries) {
      this.#pending.push(e)
    }
    if (!this.#flushQueued && this.#pending.length > 0) {
      this.#flushQueued = true
      // A promise reaction, not queueMicrotask (which Node wraps in an async resource per call).
      void Promise.resolve().then(() => this.#flush())
    }
  }

  #flush(): void {
    this.#flushQueued = false
    const es = this.#pending
    this.#pending = []
    const group = es[0]?.group
    if (es.length > 0 && es.every((e) => e.group === group) && this.engine.runNow(es)) {
      this.passes.direct++
      return
    }
    this.passes.queued += es.length
    for (const e of es) {
      if (!this.engine.push(e)) {
        const closed = this.engine.closed
        const code = closed ? 'SHUTTING_DOWN' : 'OVERLOADED'
        this.#count(code, e.value.values.length)
        const err = closed
          ? new ItemError(`stage ${this.#o.stage.name}: ${EXPIRED.closed.msg}`, code)
          : new ItemError(`stage ${this.#o.stage.name}: queue is full (${this.engine.config.maxQueue} entries)`, code)
        e.value.resolve(e.value.values.map(() => err))
      }
    }
  }

  #count(code: string, n = 1): void {
    this.#o.metrics?.items.inc({ ...this.#labels, code }, n)
  }

  /**
   * Backpressure: the next stage holds its bound; this batch waits (holding its slot, so this
   * stage starts nothing else) until it has room or the batch's last deadline has passed, and its
   * items past their deadline meanwhile are failed, not run. The jobs left to run and their queue times.
   */
  async #holdForRoom(next: StageQueue, jobs: Job[], queuedMs: number[]): Promise<{ jobs: Job[]; queuedMs: number[] }> {
    const { stage, clock } = this.#o
    this.passes.held++
    const last = Math.max(...jobs.map((j) => j.deadline))
    for (let wait = next.room(); wait && clock.now() < last; wait = next.room()) {
      let timer: unknown
      await (Number.isFinite(last) ? Promise.race([wait, new Promise<void>((resolve) => (timer = clock.setTimeout(resolve, Math.max(1, last - clock.now()))))]) : wait)
      clock.clearTimeout(timer)
    }
    const now = clock.now()
    if (!jobs.some((j) => j.deadline <= now)) {
      return { jobs, queuedMs }
    }
    const err = new ItemError(`stage ${stage.name}: ${EXPIRED.deadline.msg} (waiting for room in stage ${next.#o.stage.name})`, 'DEADLINE_EXCEEDED')
    for (const j of jobs) {
      if (j.deadline <= now) {
        this.#count(err.code, j.values.length)
        j.resolve(j.values.map(() => err))
      }
    }
    const kept = jobs.map((j) => j.deadline > now)
    return { jobs: jobs.filter((_, k) => kept[k]), queuedMs: queuedMs.filter((_, k) => kept[k]) }
  }

  async #run(batch: Batch<Job>): Promise<void> {
    const { runner, stage, clock, metrics } = this.#o
    let jobs = batch.items
    let queuedMs = batch.queuedMs
    const next = this.next
    if (next && !next.hasRoom) {
      ;({ jobs, queuedMs } = await this.#holdForRoom(next, jobs, queuedMs))
      if (jobs.length === 0) {
        return
      }
    }
    const only = jobs.length === 1 ? jobs[0] : undefined
    const { values, deadlines } = only ? { values: only.values, deadlines: new Array<number>(only.values.length).fill(only.deadline) } : concatJobs(jobs)
    const t0 = clock.now()
    this.ran += values.length
    let out: unknown[]
    try {
      out = await runner.run(values, {
        pipeline: this.#o.pipeline,
        stage: stage.name,
        batchSize: values.length,
        deadlines,
        signal: this.#o.signal,
      })
      if (!Array.isArray(out) || out.length !== values.length) {
        throw new ItemError(`stage ${stage.name} returned ${Array.isArray(out) ? out.length : typeof out} results for ${values.length} items`, 'PREDICTOR_FAILED')
      }
    } catch (e) {
      const err = toItemError(e)
      out = values.map(() => err)
    }
    if (metrics) {
      metrics.compute.observe(this.#labels, (clock.now() - t0) / 1000)
      metrics.batchSize.observe(this.#labels, values.length)
      jobs.forEach((j, k) => {
        for (let n = 0; n < j.values.length; n++) {
          metrics.queue.observe(this.#labels, (queuedMs[k] ?? 0) / 1000)
        }
      })
    }
    // Errors are rare: copy the results only when one needs its code fixed.
    let fixed = out
    let failed = 0
    for (let k = 0; k < out.length; k++) {
      const r = out[k]
      if (r instanceof Error) {
        const e = r instanceof ItemError ? r : toItemError(r)
        if (e !== r) {
          fixed = fixed === out ? [...out] : fixed
          fixed[k] = e
        }
        this.#count(e.code)
        failed++
      }
    }
    if (failed < out.length) {
      this.#count('OK', out.length - failed)
    }
    if (only) {
      only.resolve(fixed)
      return
    }
    let at = 0
    for (const j of jobs) {
      j.resolve(fixed.slice(at, (at += j.values.length)))
    }
  }
}

/**
 * The values of `jobs` end to end and each one's deadline, by plain loops: `flatMap` (and array
 * spreads) cost about ten times as much per item here (bench/src/executor-micro.ts).
 */
function concatJobs(jobs: readonly Job[]): { values: unknown[]; deadlines: number[] } {
  let n = 0
  for (const j of jobs) {
    n += j.values.length
  }
  const values: unknown[] = new Array(n)
  const deadlines: number[] = new Array<number>(n)
  let at = 0
  for (const j of jobs) {
    const vs = j.values
    for (let k = 0; k < vs.length; k++, at++) {
      values[at] = vs[k]
      deadlines[at] = j.deadline
    }
  }
  return { values, deadlines }
}
