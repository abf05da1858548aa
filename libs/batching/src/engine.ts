/**
 * The batching engine: a queue of items, a dispatch policy and a fixed number of executor slots.
 * Pure: all time and scheduling goes through the injected `Clock`; all execution through `run`.
 * @module
 */
import { estimateFinish, shouldJudge, type Arrival, type QueueWait } from './admission.ts'
import { realClock, type Clock } from './clock.ts'
import { resolveBatchingConfig, type BatchingConfig, type ResolvedBatchingConfig } from './config.ts'
import { BatchTuner, type CapChange } from './batch-tuner.ts'
import { CostModel } from './cost-model.ts'
import { EARLY_DROP_MIN_SAMPLES, sumCost, type PlannedBatch } from './fill.ts'
import { serverSlo, type Slo } from './slo.ts'
import { nextWake, plan } from './policy.ts'
import { GroupedQueue, type Queued } from './queue.ts'
import { emptyStats, reportAsync, type MutableStats } from './stats.ts'
import type { Batch, BatchEngineOptions, BatchStats, ExpireReason, Offer, QueueEntry } from './types.ts'
import { WakeTimer } from './wake-timer.ts'

/**
 * Collects items into batches and hands them to `run`, under the configured policy.
 *
 * Guarantees: every item accepted by `push` is passed to `run` exactly once or to `expire` exactly
 * once (never both, never neither); a batch never mixes groups and never exceeds the `batchCap`
 * (at most `maxBatchSize`; nor, unless it holds a single item, the `maxBatchCost`) in force when it
 * is dispatched; at most
 * `concurrency` batches run at once; at most one timer is armed at any time, and none while the
 * queue is empty.
 */
export class BatchEngine<T> {
  /** Counters since construction (live). */
  readonly stats: BatchStats
  /**
   * The service-time model, fed by the engine with every batch that `run` completes (summed cost,
   * ms from dispatch to settle). `.a`, `.c`, `.samples` and `.ratio` are useful as metrics.
   */
  readonly costModel: CostModel

  readonly #run: (batch: Batch<T>) => Promise<void>
  readonly #expire: (value: T, reason: ExpireReason) => void
  readonly #onRunError: (err: unknown, batch: Batch<T>) => void
  readonly #clock: Clock
  readonly #concurrency: number
  readonly #queue = new GroupedQueue<T>()
  readonly #stats: MutableStats = emptyStats()
  #config: Readonly<ResolvedBatchingConfig>
  /** `#config` with `maxBatchSize` replaced by the tuned cap: what planning and admission use. */
  #eff: Readonly<ResolvedBatchingConfig>
  #tuner: BatchTuner | undefined
  readonly #onCapChange: ((change: CapChange) => void) | undefined
  readonly #tenantWeight: ((tenant: string) => number) | undefined
  #running = 0
  /** Running batches: start and cost (their expected ends are estimated when admission asks). */
  readonly #runningEnds = new Set<{ start: number; cost: number }>()
  #closed = false
  #pumpScheduled = false
  readonly #wake: WakeTimer
  #idleWaiters: (() => void)[] = []

  /**
   * @throws RangeError on an invalid batching option (see `validateBatchingConfig`) or a
   * `concurrency` that is not an integer >= 1.
   */
  constructor(opts: BatchEngineOptions<T>) {
    this.#config = resolveBatchingConfig(opts)
    this.#eff = this.#config
    const concurrency = opts.concurrency ?? 1
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be an integer >= 1, got ${String(concurrency)}`)
    }
    if (typeof opts.run !== 'function' || typeof opts.expire !== 'function') {
      throw new TypeError('BatchEngine needs run and expire callbacks')
    }
    this.#concurrency = concurrency
    this.#clock = opts.clock ?? realClock
    this.#wake = new WakeTimer(this.#clock, () => this.#pump())
    this.#run = opts.run.bind(opts)
    this.#expire = opts.expire.bind(opts)
    this.#onRunError = opts.onRunError ? opts.onRunError.bind(opts) : reportAsync
    this.stats = this.#stats
    this.costModel = opts.costModel ?? new CostModel()
    this.#onCapChange = opts.onCapChange ? opts.onCapChange.bind(opts) : undefined
    this.#tenantWeight = opts.tenantWeight ? opts.tenantWeight.bind(opts) : undefined
    this.#applyTuning()
  }

  /**
   * The largest batch the engine dispatches now: the self-tuned cap under `autoBatchSize`, else
   * `config.maxBatchSize` (which is always the hard cap).
   */
  get batchCap(): number {
    return this.#eff.maxBatchSize
  }

  /**
   * The model's server-side SLO now (`slo.ts`): the configured `sloMs`, else derived from the
   * learned cost at `config.maxBatchSize` (independent of the self-tuned `batchCap`).
   */
  get slo(): Slo {
    return serverSlo(this.#config, this.costModel)
  }

  /** The batch-cap tuner while `autoBatchSize` is on (its `changes`, `last`, `curve()` explain the cap). */
  get tuner(): BatchTuner | undefined {
    return this.#tuner
  }

  /** The configuration in force (frozen; replaced by `configure`). */
  get config(): Readonly<ResolvedBatchingConfig> {
    return this.#config
  }

  /** Items waiting in the queue. */
  get queued(): number {
    return this.#queue.size
  }

  /** Batches currently running (at most `concurrency`). */
  get running(): number {
    return this.#running
  }

  /** Executor slots, as configured at construction. */
  get concurrency(): number {
    return this.#concurrency
  }

  /** True once `close` has been called. */
  get closed(): boolean {
    return this.#closed
  }

  /**
   * Queue an item. Returns false, and queues nothing, when `offer` would not answer `'queued'`.
   * @throws RangeError as `offer`.
   */
  push(entry: QueueEntry<T>): boolean {
    return this.offer(entry).status === 'queued'
  }

  /**
   * Offer an item: `'queued'`, or refused with nothing queued: `'closed'` after `close`, `'full'`
   * when `queued >= maxQueue`, `'late'` when admission estimates it cannot finish before its
   * deadline (`eager` and `deadline` policies, once the cost model has enough samples; see
   * `admission.ts`). A refused item is the caller's to answer (503 with `retryAfterMs`).
   * An item whose deadline has already passed is accepted and expires at the next dispatch decision.
   * @throws RangeError when `deadline` or `priority` is NaN, or `cost` is not a finite number > 0.
   */
  offer(entry: QueueEntry<T>): Offer {
    const priority = entry.priority ?? 0
    const cost = entry.cost ?? 1
    if (Number.isNaN(entry.deadline) || Number.isNaN(priority)) {
      throw new RangeError('deadline and priority must not be NaN')
    }
    if (!(typeof cost === 'number' && cost > 0 && cost < Infinity)) {
      throw new RangeError(`cost must be a finite number > 0, got ${String(cost)}`)
    }
    if (this.#closed) {
      return { status: 'closed' }
    }
    if (this.#queue.size >= this.#config.maxQueue) {
      this.#stats.refused.full++
      return { status: 'full', retryAfterMs: this.#backlogMs() }
    }
    const tenant = entry.tenant ?? ''
    const maxTenant = this.#config.maxTenantQueue
    if (maxTenant > 0 && this.#queue.queuedOf(tenant) >= maxTenant) {
      this.#stats.refused.full++
      return { status: 'full', retryAfterMs: this.#backlogMs(), tenant: true }
    }
    const group = entry.group ?? ''
    const now = this.#clock.now()
    if (entry.deadline > now && this.#config.admission && this.#config.policy !== 'timer') {
      const arrival: Arrival = { deadline: entry.deadline, priority, cost, tag: this.#queue.tagFor(tenant) }
      const state = this.#admissionState(group, now)
      if (shouldJudge(state, arrival, this.#running)) {
        const est = estimateFinish(state, arrival)
        if (est.finish > entry.deadline) {
          this.#stats.refused.late++
          // "Can never" judged by the learned estimate, not its upper bound: a 400 must not come from
          // a pessimistic margin (a predictor whose items vary in time inflates the upper bound).
          const alone = this.costModel.estimate(cost)
          return {
            status: 'late',
            retryAfterMs: est.finish - now,
            estimatedFinishMs: est.finish - now,
            infeasible: now + alone > entry.deadline,
            aloneMs: alone,
          }
        }
      }
    }
    const item = this.#queue.add(entry.value, entry.deadline, group, priority, now, cost, tenant, this.#weight(tenant))
    if (this.#running < this.#concurrency) {
      this.#schedulePump()
    } else if (item.deadline < this.#wake.at) {
      this.#wake.set(item.deadline)
    }
    return { status: 'queued' }
  }

  #weight(tenant: string): number {
    if (this.#tenantWeight === undefined) {
      return 1
    }
    try {
      const w = this.#tenantWeight(tenant)
      return Number.isFinite(w) && w > 0 ? w : 1
    } catch (err) {
      reportAsync(err)
      return 1
    }
  }

  /** Items of `tenant` queued now. */
  queuedOf(tenant: string): number {
    return this.#queue.queuedOf(tenant)
  }

  /** Items queued per tenant now (tenants with queued items only). */
  queuedByTenant(): Map<string, number> {
    const out = new Map<string, number>()
    for (const [t, s] of this.#queue.tenants()) {
      out.set(t, s.queued)
    }
    return out
  }

  /**
   * Run `entries` as one batch now, in this turn, without queueing them: only when the engine
   * would dispatch them at once anyway (the `eager` policy, nothing queued, a slot free, not
   * closed), when they fit one batch (one group, at most `maxBatchSize` entries and
   * `maxBatchCost`) and none is past its deadline. Counted as an `'idle'` batch, timed by the cost
   * model like any other. Returns false, and does nothing, otherwise (the caller then `push`es).
   * This is the pass-through a pipeline stage takes when the stage is idle: no queue entry and no
   * deferred dispatch turn.
   */
  runNow(entries: readonly QueueEntry<T>[]): boolean {
    const c = this.#eff
    const first = entries[0]
    if (this.#closed || c.policy !== 'eager' || this.#queue.size > 0 || this.#running >= this.#concurrency || first === undefined || entries.length > c.maxBatchSize) {
      return false
    }
    const now = this.#clock.now()
    const group = first.group ?? ''
    let cost = 0
    for (const e of entries) {
      const ec = e.cost ?? 1
      if ((e.group ?? '') !== group || !(e.deadline > now) || !(ec > 0 && ec < Infinity) || Number.isNaN(e.priority ?? 0)) {
        return false
      }
      cost += ec
    }
    if (cost > c.maxBatchCost) {
      return false
    }
    const items = entries.map(
      (e): Queued<T> => ({ value: e.value, deadline: e.deadline, group, priority: e.priority ?? 0, cost: e.cost ?? 1, seq: -1, enqueuedAt: now, tenant: e.tenant ?? '', tag: 0 }),
    )
    this.#dispatch({ items, group, reason: 'idle' }, now)
    return true
  }

  #admissionState(group: string, now: number) {
    return {
      now,
      config: this.#eff,
      model: this.costModel,
      concurrency: this.#concurrency,
      runningEnds: [...this.#runningEnds].map((r) => r.start + this.costModel.upper(r.cost)),
      list: this.#queue.items(group),
      listCost: this.#queue.cost(group),
    }
  }

  /**
   * The estimated queue wait of a new item (cost 1, priority 0), for admission at the gateway's
   * door (docs/batching.md#admission-at-the-door), and for each of `tenants`.
   * Judged as `offer` would judge it (`admission.ts`), in the group where it waits least (the door
   * cannot know the item's group; the estimate errs towards admitting, as admission does); under the
   * `'deadline'` policy an arrival may overtake every later deadline, so only running batches and
   * higher priorities count (a lower bound). `undefined` whenever `offer` would not judge at all
   * (admission off, the `'timer'` policy, fewer than `EARLY_DROP_MIN_SAMPLES` cost samples, closed):
   * then the door must admit. O(queue) per tenant asked for.
   */
  waitEstimate(tenants: Iterable<string> = []): QueueWait | undefined {
    const c = this.#config
    if (this.#closed || !c.admission || c.policy === 'timer' || this.costModel.samples < EARLY_DROP_MIN_SAMPLES) {
      return undefined
    }
    const now = this.#clock.now()
    const groups = this.#queue.groupNames()
    const states = (groups.length > 0 ? groups : ['']).map((g) => this.#admissionState(g, now))
    const deadline = c.policy === 'deadline' ? now : Infinity
    const judge = (tag: number) => {
      let best = { waitMs: Infinity, serviceMs: 0 }
      for (const s of states) {
        const e = estimateFinish(s, { deadline, priority: 0, cost: 1, tag })
        if (e.start - now < best.waitMs) {
          best = { waitMs: Math.max(0, e.start - now), serviceMs: e.finish - e.start }
        }
      }
      return best
    }
    const fresh = judge(this.#queue.virtualTime)
    const byTenant = new Map<string, number>()
    for (const t of tenants) {
      if (!byTenant.has(t)) {
        byTenant.set(t, this.#queue.queuedOf(t) > 0 ? judge(this.#queue.tagFor(t)).waitMs : fresh.waitMs)
      }
    }
    const cap = Math.max(1, Math.min(this.#eff.maxBatchSize, Math.floor(this.#eff.maxBatchCost)))
    const itemMs = this.costModel.upper(cap) / cap / this.#concurrency
    return { queued: this.#queue.size, ...fresh, itemMs, aloneMs: this.costModel.estimate(1), tenants: byTenant }
  }

  /** Rough time (ms) to work off the whole queue: a hint for `Retry-After`. */
  get backlogMs(): number {
    return this.#backlogMs()
  }

  #backlogMs(): number {
    if (this.costModel.samples === 0) {
      return 1000
    }
    const cap = this.#eff.maxBatchSize
    const batches = Math.ceil(this.#queue.size / cap)
    return (batches / this.#concurrency) * this.costModel.upper(cap)
  }

  /**
   * Remove every queued item whose value matches `pred`, calling `expire(value, 'cancelled')` for
   * each (in arrival order). Running batches are not affected. Returns how many were removed.
   * If `pred` throws, nothing is removed and the error propagates.
   */
  cancel(pred: (value: T) => boolean): number {
    const all = [...this.#queue.groups()].flatMap((list) => [...list])
    const hits = new Set(all.filter((item) => pred(item.value)))
    if (hits.size === 0) {
      return 0
    }
    const removed = this.#queue.removeWhere((item) => hits.has(item))
    this.#refreshWake()
    this.#expireItems(removed, 'cancelled')
    this.#notifyIdle()
    return removed.length
  }

  /**
   * Change batching knobs. Validated first (nothing changes on error); the next dispatch decision
   * uses the new values, and one is scheduled now if anything is queued (so, for example, switching
   * `'timer'` to `'eager'` dispatches after the current turn when a slot is free).
   * @throws RangeError as `validateBatchingConfig`.
   */
  configure(patch: Partial<BatchingConfig>): void {
    this.#config = resolveBatchingConfig(patch, this.#config)
    this.#applyTuning()
    if (this.#queue.size > 0) {
      this.#schedulePump()
    }
  }

  /** Resolves once nothing is queued and nothing runs (at once if that is already so). */
  idle(): Promise<void> {
    if (this.#isIdle()) {
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      this.#idleWaiters.push(resolve)
    })
  }

  /**
   * Stop: clear the timer, expire every queued item with `'closed'`, and refuse further pushes.
   * Running batches finish normally (`idle()` still waits for them). Idempotent.
   */
  close(): void {
    if (this.#closed) {
      return
    }
    this.#closed = true
    this.#wake.clear()
    const removed = this.#queue.removeWhere(() => true)
    this.#expireItems(removed, 'closed')
    this.#notifyIdle()
  }

  #isIdle(): boolean {
    return this.#queue.size === 0 && this.#running === 0
  }

  #notifyIdle(): void {
    if (this.#idleWaiters.length > 0 && this.#isIdle()) {
      const waiters = this.#idleWaiters
      this.#idleWaiters = []
      for (const resolve of waiters) {
        resolve()
      }
    }
  }

  #schedulePump(): void {
    if (this.#pumpScheduled || this.#closed) {
      return
    }
    this.#pumpScheduled = true
    this.#clock.defer(() => {
      this.#pumpScheduled = false
      this.#pump()
    })
  }

  /** One dispatch decision: expire what is due, fill free slots (dooming what the policy drops), re-arm the timer. */
  #pump(): void {
    while (!this.#closed) {
      const now = this.#clock.now()
      this.#expireItems(
        this.#queue.removeWhere((item) => item.deadline <= now),
        'deadline',
      )
      if (this.#isClosed() || this.#running >= this.#concurrency) {
        break
      }
      const { doomed, batch } = plan(this.#queue, this.#eff, this.costModel, now)
      if (batch === undefined && doomed.length === 0) {
        break
      }
      const gone = new Set<Queued<T>>([...doomed, ...(batch?.items ?? [])])
      this.#queue.removeWhere((item) => gone.has(item))
      if (batch !== undefined) {
        this.#queue.served(batch.items)
      }
      // Answer the doomed first; an `expire` callback may close the engine meanwhile.
      this.#expireItems(doomed, 'doomed')
      if (batch !== undefined) {
        if (this.#isClosed()) {
          this.#expireItems(batch.items, 'closed')
        } else {
          this.#dispatch(batch, now)
        }
      }
    }
    this.#refreshWake()
    this.#notifyIdle()
  }

  /**
   * `#closed` read through a call: an `expire` callback run since the last check may have closed
   * the engine (TypeScript would keep the narrowing of a field read across the callback).
   */
  #isClosed(): boolean {
    return this.#closed
  }

  #dispatch({ items, group, reason }: PlannedBatch<T>, now: number): void {
    const cost = sumCost(items)
    let budget = Infinity
    for (const item of items) {
      budget = Math.min(budget, item.deadline - item.enqueuedAt)
    }
    const batch: Batch<T> = {
      items: items.map((item) => item.value),
      group,
      reason,
      startedAt: now,
      queuedMs: items.map((item) => now - item.enqueuedAt),
      cost,
    }
    this.#running++
    const expected = { start: now, cost }
    this.#runningEnds.add(expected)
    this.#stats.batches++
    this.#stats.items += items.length
    this.#stats.dispatched[reason]++
    const onDone = () => {
      this.#runningEnds.delete(expected)
      const end = this.#clock.now()
      const ms = batch.serviceMs !== undefined && batch.serviceMs >= 0 ? batch.serviceMs : end - now
      this.costModel.observe(cost, ms)
      this.#tune(this.#tuner?.observe(items.length, ms, budget, this.costModel.ratio, end))
      this.#settled()
    }
    const onError = (err: unknown) => {
      this.#runningEnds.delete(expected)
      try {
        this.#onRunError(err, batch)
      } catch (hookErr) {
        reportAsync(hookErr)
      }
      this.#settled()
    }
    let done: Promise<void>
    try {
      done = Promise.resolve(this.#run(batch))
    } catch (err) {
      // A sync throw of `run` reaches onRunError as thrown, one microtask later, as a rejection would.
      queueMicrotask(() => onError(err))
      return
    }
    done.then(onDone, onError)
  }

  /** Create, drop or re-limit the tuner after a configuration change. */
  #applyTuning(): void {
    const c = this.#config
    if (!c.autoBatchSize) {
      this.#tuner = undefined
      this.#eff = c
      return
    }
    let change: CapChange | undefined
    if (this.#tuner === undefined) {
      this.#tuner = new BatchTuner({ limit: c.maxBatchSize })
    } else {
      change = this.#tuner.setLimit(c.maxBatchSize, this.#clock.now())
    }
    this.#eff = Object.freeze({ ...c, maxBatchSize: this.#tuner.cap })
    this.#tune(change)
  }

  #tune(change: CapChange | undefined): void {
    if (change === undefined || this.#tuner === undefined) {
      return
    }
    this.#eff = Object.freeze({ ...this.#config, maxBatchSize: this.#tuner.cap })
    if (this.#onCapChange) {
      try {
        this.#onCapChange(change)
      } catch (err) {
        reportAsync(err)
      }
    }
  }

  #settled(): void {
    this.#running--
    if (this.#queue.size > 0) {
      this.#schedulePump()
    }
    this.#notifyIdle()
  }

  #expireItems(items: readonly Queued<T>[], reason: ExpireReason): void {
    this.#stats.expired[reason] += items.length
    for (const item of items) {
      try {
        this.#expire(item.value, reason)
      } catch (err) {
        reportAsync(err)
      }
    }
  }

  /** Keep the one wake-up timer at `nextWake`; none while the queue is empty or after close. */
  #refreshWake(): void {
    if (this.#closed || this.#queue.size === 0) {
      this.#wake.clear()
    } else {
      const slotFree = this.#running < this.#concurrency
      this.#wake.set(nextWake(this.#queue, this.#eff, this.costModel, this.#clock.now(), slotFree))
    }
  }
}
