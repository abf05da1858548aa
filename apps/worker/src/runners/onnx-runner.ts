import {
  CohortError,
  DATATYPE_SIZE,
  encodeBytesElements,
  groupKeyOf,
  jsonToTensor,
  sliceRows,
  toValues,
  toWireError,
  wireCounts,
  type Datatype,
  type InferRequest,
  type ModelMeta,
  type WireTensor,
} from '@cohort/protocol'
import { ortMetrics, type Registry } from '@cohort/metrics'
import { OrtPool, type ExecutionProvider, type HostTensor, type HostValueMeta, type RunResult } from '../ort/ort-pool.ts'
import { DEFAULT_INLINE_RUN_MS, InlineLane, RunTimes } from '../ort/inline-lane.ts'
import { datatypeOfOrt, ortType, viewOf } from './ort-types.ts'
import { elementAt } from '../element-at.ts'
import { DEFAULT_PAD_VALUE, bucketOf, copyCorner, filledBuffer, type PaddingOptions } from './padding.ts'
import type { ItemResult, ModelRunner, PreparedItem, RunBatchOptions, RunnerEvents } from './types.ts'

/**
 * The batch size limit of an ONNX model when none is given: the self-tuned cap starts at 32 and may
 * grow to this (the `heavy` MLP serves the most items per second at 128 on this class of CPU).
 */
export const DEFAULT_ONNX_BATCH_LIMIT = 256

/** Options of {@link OnnxRunner}. */
export interface OnnxRunnerOptions {
  name: string
  path: string
  /** @default 'cpu' */
  ep?: ExecutionProvider
  /** @default 1 */
  instances?: number
  intraOpNumThreads?: number
  /**
   * Run each ORT instance in a child process instead of a worker thread. Only a process can be
   * stopped inside a native `session.run()` that never returns (docs/reliability.md#batch-time-limit).
   * @default ep !== 'cpu' && instances > 1
   */
  processes?: boolean
  /** Let idle ORT pool threads spin (see `OrtPoolOptions.allowSpinning`). @default false */
  allowSpinning?: boolean
  /**
   * The inline lane (docs/architecture.md#the-inline-lane): a batch whose predicted compute time
   * is at most this many ms runs in a second, single-thread ORT session on the calling thread
   * instead of being handed to the pool (two thread wake-ups saved); bigger batches go to the
   * pool. The lane is kept only for CPU, in worker threads (not `processes`), when a one-row run
   * at start takes at most this. 0 disables it.
   * @default DEFAULT_INLINE_RUN_MS (0.25)
   */
  inlineRunMs?: number
  /**
   * Largest batch, a hard cap. When given, the self-tuned cap moves within `[1, maxBatchSize]`;
   * when absent, within `[1, DEFAULT_ONNX_BATCH_LIMIT]`.
   * @default DEFAULT_ONNX_BATCH_LIMIT (256)
   */
  maxBatchSize?: number
  /**
   * Self-tune the batch cap (docs/batching.md#self-tuned-batch-cap); false keeps every batch at up
   * to `maxBatchSize` items.
   * @default true
   */
  autoBatchSize?: boolean
  /** @default 5 */
  maxDelayMs?: number
  /**
   * Length bucketing with padding: items whose dynamic dims differ share a batch when their
   * lengths fall in the same bucket; they are padded to the longest member and outputs that carry
   * the padded dim are cropped back. Off by default (items of different shapes never mix).
   */
  padding?: PaddingOptions
  /**
   * Warm-up at load, before the model is announced: `'off'`, or `count` runs of a zero batch of
   * each of `sizes` rows (symbolic dims 1; sizes above the model's batch limit are cut to it).
   * @default { count: 1, sizes: [1] }
   */
  warmup?: 'off' | { count: number; sizes?: readonly number[] }
}

interface InputSpec {
  name: string
  datatype: Datatype
  /** Non-batch dims; -1 = any. */
  rest: number[]
  /** Symbolic names of the non-batch dims (null when fixed). */
  restNames: (string | null)[]
}

/** Where one item's rows live: a request's batch-major tensors and the row index. */
interface OnnxItem {
  src: Record<string, WireTensor>
  row: number
}

/**
 * Serves any ONNX model with a leading dynamic batch dimension: items are concatenated on dim 0,
 * run in an ORT session off the main thread, and outputs split back per item.
 */
export class OnnxRunner implements ModelRunner {
  readonly name: string
  readonly concurrency: number
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number; autoBatchSize: boolean }
  readonly #pool: OrtPool
  /** The inline lane, when kept at start (see `OnnxRunnerOptions.inlineRunMs`). */
  #inline: InlineLane | undefined
  readonly #inlineRunMs: number
  readonly #path: string
  /** Compute time of past batches by size, both lanes: what decides the lane. */
  #runTimes = new RunTimes()
  /** Runs taken by each lane (for tests and operators). */
  readonly lanes = { inline: 0, pool: 0 }
  readonly #padding: PaddingOptions | undefined
  /** Inputs the client sends (the mask input excluded). */
  #inputs: InputSpec[] = []
  #mask: InputSpec | undefined
  #ready = false
  readonly #warmupSpec: OnnxRunnerOptions['warmup']
  /** The leading dimension when the model fixes it (every batch is padded to it), else undefined. */
  #fixedBatch: number | undefined
  /** A leading dimension fixed at n: batches hold at most n items (set at start). */
  batchLimit: { maxBatchSize: number; reason: string } | undefined

  constructor(opts: OnnxRunnerOptions) {
    this.name = opts.name
    this.#pool = new OrtPool({
      path: opts.path,
      ep: opts.ep ?? 'cpu',
      instances: opts.instances ?? 1,
      ...(opts.intraOpNumThreads !== undefined ? { intraOpNumThreads: opts.intraOpNumThreads } : {}),
      ...(opts.processes !== undefined ? { processes: opts.processes } : {}),
      ...(opts.allowSpinning !== undefined ? { allowSpinning: opts.allowSpinning } : {}),
    })
    this.concurrency = this.#pool.instances
    const inlineable = (opts.ep ?? 'cpu') === 'cpu' && opts.processes !== true
    this.#inlineRunMs = inlineable ? Math.max(0, opts.inlineRunMs ?? DEFAULT_INLINE_RUN_MS) : 0
    this.#path = opts.path
    this.#padding = opts.padding
    this.#warmupSpec = opts.warmup
    this.batchDefaults = {
      maxBatchSize: opts.maxBatchSize ?? DEFAULT_ONNX_BATCH_LIMIT,
      maxDelayMs: opts.maxDelayMs ?? 5,
      autoBatchSize: opts.autoBatchSize ?? true,
    }
  }

  /** Count runs, busy time, exits and restarts of each ORT instance, and instances by state. */
  instrument(registry: Registry): void {
    const m = ortMetrics(registry)
    const model = this.name
    const at = (i: number | 'inline') => ({ model, instance: String(i) })
    const run = (i: number | 'inline', busyMs: number, ok: boolean): void => {
      m.busy.inc(at(i), busyMs / 1000)
      m.runs.inc({ ...at(i), result: ok ? 'ok' : 'error' })
    }
    // Runs on the inline lane count as instance "inline" (the main thread's busy time).
    this.#onInlineRun = (busyMs, ok) => run('inline', busyMs, ok)
    this.#pool.watch({
      run,
      exit: (i) => m.exits.inc(at(i)),
      restart: (i) => m.restarts.inc(at(i)),
    })
    m.instances.collect(() => {
      const s = this.#pool.states()
      return [
        [{ model, state: 'live' }, s.live],
        [{ model, state: 'dead' }, s.dead],
      ]
    })
  }

  /** start() while it runs: close() waits for it (see close). */
  #starting: Promise<void> | undefined
  #closed = false

  start(): Promise<void> {
    this.#starting ??= this.#start()
    return this.#starting
  }

  async #start(): Promise<void> {
    await this.#pool.start()
    const all = this.#pool.inputs.map((m) => specOf(this.name, m))
    const maskName = this.#padding?.maskInput
    if (maskName !== undefined) {
      this.#mask = all.find((x) => x.name === maskName)
      if (!this.#mask) {
        throw new Error(`model "${this.name}" has no input "${maskName}" for the attention mask`)
      }
    }
    this.#inputs = all.filter((x) => x.name !== maskName)
    for (const o of this.#pool.outputs) {
      specOf(this.name, o)
    }
    this.#checkLeadingDims()
    await this.#warmup()
    if (this.#closed) {
      throw new CohortError('SHUTTING_DOWN', `model "${this.name}" was closed while it started`)
    }
    await this.#openInline()
    this.#ready = true
  }

  /**
   * Open the inline lane when enabled: a second session on this thread, warmed with a one-row
   * batch, then run three times; kept when the fastest of those took at most `inlineRunMs` (a heavier model never
   * runs a batch inline, so it does not keep a second copy of its weights).
   */
  async #openInline(): Promise<void> {
    if (this.#inlineRunMs <= 0 || this.#mask !== undefined || this.#inputs.some((s) => s.datatype === 'BYTES')) {
      return
    }
    const lane = await InlineLane.open(this.#path)
    if (!lane) {
      return
    }
    if (this.#closed) {
      await lane.close() // closed while it opened: nothing may run on it now
      return
    }
    const feeds = this.#zeroFeeds(this.#fixedBatch ?? 1)
    try {
      await lane.run(feeds())
      let computeMs = Infinity
      for (let i = 0; i < 3; i++) {
        computeMs = Math.min(computeMs, (await lane.run(feeds())).computeMs)
      }
      if (computeMs <= this.#inlineRunMs) {
        // Warm runs only: the pool's warm-up (a first run, the slowest) does not count.
        this.#runTimes = new RunTimes()
        this.#runTimes.observe(this.#fixedBatch ?? 1, computeMs)
        this.#inline = lane
        return
      }
    } catch {
      // Symbolic dims that need other values than 1: no inline lane (the pool serves every batch).
    }
    await lane.close()
  }

  /** Fresh zero feeds of `rows` rows (symbolic dims 1), each call its own buffers. */
  #zeroFeeds(rows: number): () => Record<string, HostTensor> {
    return () => {
      const feeds: Record<string, HostTensor> = {}
      for (const spec of this.#inputs) {
        const dims = [rows, ...spec.rest.map((d) => (d < 0 ? 1 : d))]
        const count = dims.reduce((a, b) => a * b, 1)
        feeds[spec.name] = { type: ortType(spec.datatype), dims, data: viewOf(spec.datatype, new ArrayBuffer(count * DATATYPE_SIZE[spec.datatype]), count) }
      }
      return feeds
    }
  }

  /** Told about each inline run (metrics; set by instrument()). */
  #onInlineRun: ((busyMs: number, ok: boolean) => void) | undefined

  /**
   * Run a batch of `rows` rows on the inline lane when nothing waits behind it (`opts.behind`) and
   * its predicted time allows, else on the pool: with a backlog, the main thread decodes and
   * encodes the next requests while an ORT thread runs this batch.
   */
  async #run(feeds: Record<string, HostTensor>, rows: number, opts: RunBatchOptions): Promise<RunResult> {
    const lane = (opts.behind ?? 0) > 0 ? undefined : this.#inline
    const predicted = lane ? this.#runTimes.predict(rows) : undefined
    if (!lane || predicted === undefined || predicted > this.#inlineRunMs) {
      this.lanes.pool++
      const r = await this.#pool.run(feeds, opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {})
      this.#runTimes.observe(rows, r.computeMs)
      return r
    }
    this.lanes.inline++
    const t0 = performance.now()
    try {
      const r = await lane.run(feeds, this.#inlineRunMs / 2)
      this.#runTimes.observe(rows, r.computeMs)
      this.#onInlineRun?.(performance.now() - t0, true)
      return r
    } catch (e) {
      this.#onInlineRun?.(performance.now() - t0, false)
      throw new CohortError('PREDICTOR_FAILED', `onnxruntime: ${e instanceof Error ? e.message : String(e)}`)
    }
  }

  /**
   * The leading dimension of every input and output: dynamic (any batch), fixed at 1 (batches of
   * one item), or fixed at n > 1 everywhere (batches padded to n rows, pad rows dropped). Anything
   * else (fixed in some values only, different values) is refused: it has no batch dimension.
   */
  #checkLeadingDims(): void {
    const values = [...this.#pool.inputs, ...this.#pool.outputs]
    // specOf (run on every value first) refused values without a leading dimension.
    const fixed = new Set(this.#pool.inputs.map((m) => elementAt(m.shape, 0)).filter((d) => d !== -1))
    const [n] = fixed
    if (n === undefined) {
      return
    }
    const everywhere = fixed.size === 1 && values.every((m) => m.shape[0] === n || (n === 1 && m.shape[0] === -1))
    if (!everywhere) {
      const shapes = values.map((m) => `${m.name} ${JSON.stringify(m.shape)}`).join(', ')
      throw new Error(`model "${this.name}" needs a leading dynamic batch dimension, or one fixed at the same size in every input and output (${shapes})`)
    }
    this.#fixedBatch = n
    this.batchLimit = {
      maxBatchSize: n,
      reason:
        n === 1
          ? 'the model fixes its leading dimension at 1: one item per batch'
          : `the model fixes its leading dimension at ${n}: batches are padded to ${n} rows and the pad rows dropped`,
    }
  }

  #meta: ModelMeta | undefined

  /** Loaded, and every ORT instance is up (not while one is being replaced). */
  get #live(): boolean {
    return this.#ready && this.#pool.live === this.#pool.instances
  }

  meta(): ModelMeta {
    if (this.#meta?.ready === this.#live) {
      return this.#meta
    }
    this.#meta = this.#buildMeta()
    return this.#meta
  }

  #buildMeta(): ModelMeta {
    const t = (m: HostValueMeta) => ({ name: m.name, datatype: datatypeOfOrt(m.type) ?? m.type, shape: m.shape })
    return {
      name: this.name,
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: this.#pool.inputs.filter((m) => m.name !== this.#mask?.name).map(t),
      outputs: this.#pool.outputs.map(t),
      kind: 'onnx',
      ready: this.#live,
      maxBatchSize: this.batchDefaults.maxBatchSize,
      maxDelayMs: this.batchDefaults.maxDelayMs,
    }
  }

  prepare(req: InferRequest): PreparedItem[] {
    if (req.tensors) {
      const tensors = req.tensors
      this.#checkTensors(tensors)
      const first = this.#inputs[0]
      const n = first !== undefined ? (inputOf(tensors, first.name).shape[0] ?? 0) : 0
      const group = this.#groupOf(tensors)
      const cost = this.#costOf(tensors)
      return Array.from({ length: n }, (_, row) => ({ group, cost, payload: { src: tensors, row } satisfies OnnxItem }))
    }
    return (req.items ?? []).map((item, i) => {
      try {
        const src = this.#itemToTensors(item, i)
        return { group: this.#groupOf(src), cost: this.#costOf(src), payload: { src, row: 0 } satisfies OnnxItem }
      } catch (e) {
        return { group: '', payload: undefined, error: toWireError(e, 'INVALID_INPUT') }
      }
    })
  }

  /** Receive the ORT instances' restart events (a run past its limit, an instance that died). */
  observe(events: RunnerEvents): void {
    this.#pool.observe(events)
  }

  async runBatch(payloads: unknown[], _signal?: AbortSignal, opts: RunBatchOptions = {}): Promise<ItemResult[]> {
    const given = payloads as OnnxItem[]
    const items = fillToFixed(given, this.#fixedBatch)
    const n = items.length
    const feeds: Record<string, HostTensor> = {}
    for (const spec of this.#inputs) {
      feeds[spec.name] = gather(spec, items, this.#padding?.padValue ?? DEFAULT_PAD_VALUE)
    }
    // Real length of each item along each symbolic dim, and the batch's padded length.
    const real = new Map<string, { lens: number[]; max: number }>()
    if (this.#padding) {
      for (const spec of this.#inputs) {
        spec.restNames.forEach((dn, k) => {
          if (dn !== null && !real.has(dn) && spec.rest[k] === -1) {
            const lens = items.map((it) => elementAt(inputOf(it.src, spec.name).shape, k + 1))
            real.set(dn, { lens, max: Math.max(...lens) })
          }
        })
      }
      if (this.#mask) {
        feeds[this.#mask.name] = buildMask(this.#mask, real, n)
      }
    }
    const { outputs, computeMs } = await this.#run(feeds, n, opts)
    if (opts.measured) {
      opts.measured.computeMs = computeMs
    }
    const outMeta = new Map(this.#pool.outputs.map((m) => [m.name, m]))
    const results: ItemResult[] = items.map(() => ({ tensors: {} }))
    for (const [name, out] of Object.entries(outputs)) {
      const datatype = datatypeOfOrt(out.type)
      if (!datatype) {
        throw new CohortError('INTERNAL', `output "${name}" has unsupported type ${out.type}`)
      }
      if (out.dims[0] !== n) {
        throw new CohortError('INTERNAL', `output "${name}" has dim 0 = ${out.dims[0]}, expected the batch size ${n}`)
      }
      const t: WireTensor = { datatype, shape: out.dims, bytes: bytesOf(out.data) }
      const names = outMeta.get(name)?.dimNames?.slice(1) ?? []
      const crop = real.size > 0 && datatype !== 'BYTES' && names.some((dn) => dn !== null && real.has(dn))
      for (let i = 0; i < n; i++) {
        let row = sliceRows(t, i, 1)
        if (crop) {
          const rest = row.shape.slice(1)
          const want = rest.map((d, k) => {
            const r = realOf(real, names[k])
            return r !== undefined ? elementAt(r.lens, i) : d
          })
          const size = DATATYPE_SIZE[datatype]
          const dst = new Uint8Array(want.reduce((a, b) => a * b, 1) * size)
          copyCorner(row.bytes, rest, dst, want, size)
          row = { datatype, shape: [1, ...want], bytes: dst }
        }
        ;(results[i] as { tensors: Record<string, WireTensor> }).tensors[name] = row
      }
    }
    if (results.length > given.length) {
      results.length = given.length
    }
    return results
  }

  /**
   * Release the sessions. A start() still running is waited for first (it stops at its next step):
   * ending ONNX Runtime while a session loads or a warm-up run is inside native code aborts the
   * process at exit (SIGABRT, "terminate called after throwing an instance of 'Napi::Error'";
   * a worker SIGTERMed during a repository load did).
   */
  async close(): Promise<void> {
    this.#closed = true
    await this.#starting?.catch(() => undefined)
    const lane = this.#inline
    this.#inline = undefined
    await Promise.all([this.#pool.close(), lane?.close().catch(() => undefined)])
  }

  /** Batch group: exact shapes, or length buckets of the dynamic dims when padding is on. */
  #groupOf(tensors: Record<string, WireTensor>): string {
    if (!this.#padding) {
      return groupKeyOf(tensors)
    }
    const parts: string[] = []
    for (const spec of this.#inputs) {
      const t = inputOf(tensors, spec.name)
      const dims = t.shape.slice(1).map((d, k) => (spec.rest[k] === -1 ? `b${bucketOf(d, this.#padding?.buckets)}` : String(d)))
      parts.push(`${JSON.stringify(spec.name)}:${t.datatype}[${dims.join(',')}]`)
    }
    return parts.join('|')
  }

  /** Per-item cost: the product of the first input's dynamic dims (tokens, pixels); 1 for fixed shapes. */
  #costOf(tensors: Record<string, WireTensor>): number {
    for (const spec of this.#inputs) {
      if (spec.rest.some((d) => d === -1)) {
        const t = inputOf(tensors, spec.name)
        return t.shape.slice(1).reduce((acc, d, k) => (spec.rest[k] === -1 ? acc * d : acc), 1)
      }
    }
    return 1
  }

  #checkTensors(tensors: Record<string, WireTensor>): void {
    const names = Object.keys(tensors)
    for (const spec of this.#inputs) {
      const t = tensors[spec.name]
      if (!t) {
        throw new CohortError('INVALID_INPUT', `model "${this.name}" needs input "${spec.name}" (inputs: ${this.#inputs.map((s) => s.name).join(', ')})`)
      }
      checkTensor(this.name, spec, t)
    }
    for (const n of names) {
      if (!this.#inputs.some((s) => s.name === n)) {
        throw new CohortError('INVALID_INPUT', `model "${this.name}" has no input "${n}"`)
      }
    }
  }

  /** A JSON item `{inputName: nestedArray (one item, no batch dim)}` to one-row tensors. */
  #itemToTensors(item: unknown, index: number): Record<string, WireTensor> {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      throw new CohortError('INVALID_INPUT', `item ${index}: expected an object of input name -> array`)
    }
    const obj = item as Record<string, unknown>
    const out: Record<string, WireTensor> = {}
    for (const spec of this.#inputs) {
      if (!(spec.name in obj)) {
        throw new CohortError('INVALID_INPUT', `item ${index}: missing input "${spec.name}"`)
      }
      const v = obj[spec.name]
      const shape = [1, ...nestedShape(v)]
      const t = jsonToTensor(spec.name, spec.datatype, shape, v)
      checkTensor(this.name, spec, t)
      out[spec.name] = t
    }
    for (const k of Object.keys(obj)) {
      if (!this.#inputs.some((s) => s.name === k)) {
        throw new CohortError('INVALID_INPUT', `item ${index}: model "${this.name}" has no input "${k}"`)
      }
    }
    return out
  }

  /** Zero batches (symbolic dims = 1) as `warmup` says, so the first requests pay no warm-up. */
  async #warmup(): Promise<void> {
    const w = this.#warmupSpec ?? { count: 1, sizes: [1] }
    if (w === 'off') {
      return
    }
    const limit = this.batchLimit?.maxBatchSize ?? Infinity
    const sizes = [...new Set((w.sizes ?? [1]).map((s) => Math.max(1, Math.min(s, limit))))]
    for (const rows of sizes) {
      const src: Record<string, WireTensor> = {}
      for (const spec of this.#inputs) {
        const shape = [rows, ...spec.rest.map((d) => (d < 0 ? 1 : d))]
        const count = shape.reduce((a, b) => a * b, 1)
        src[spec.name] =
          spec.datatype === 'BYTES'
            ? { datatype: 'BYTES', shape, bytes: encodeBytesElements(new Array<string>(count).fill('')) }
            : { datatype: spec.datatype, shape, bytes: new Uint8Array(count * DATATYPE_SIZE[spec.datatype]) }
      }
      const items = Array.from({ length: rows }, (_, row) => ({ src, row }) satisfies OnnxItem)
      for (let i = 0; i < w.count; i++) {
        try {
          await this.runBatch(items)
        } catch {
          // Models whose symbolic dims need other values than 1 warm up on their first real batch.
          return
        }
      }
    }
  }
}

function specOf(model: string, m: HostValueMeta): InputSpec {
  const datatype = datatypeOfOrt(m.type)
  if (!m.isTensor || !datatype) {
    throw new Error(`model "${model}": value "${m.name}" has type ${m.type}, which Cohort cannot serve`)
  }
  if (m.shape.length === 0 || m.shape[0] === 0) {
    throw new Error(`model "${model}": "${m.name}" needs a leading dynamic batch dimension (shape ${JSON.stringify(m.shape)})`)
  }
  return { name: m.name, datatype, rest: m.shape.slice(1), restNames: (m.dimNames ?? []).slice(1) }
}

/** The attention mask: 1 where an item has real data along the padded dims, 0 in the padding. */
function buildMask(spec: InputSpec, real: Map<string, { lens: number[]; max: number }>, n: number): HostTensor {
  const target = spec.rest.map((d, k) => {
    const r = realOf(real, spec.restNames[k])
    return r !== undefined ? r.max : Math.max(d, 1)
  })
  const rowElems = target.reduce((a, b) => a * b, 1)
  const size = DATATYPE_SIZE[spec.datatype]
  const buf = new Uint8Array(filledBuffer(spec.datatype, rowElems * n, 0))
  for (let i = 0; i < n; i++) {
    const mine = spec.rest.map((_d, k) => {
      const r = realOf(real, spec.restNames[k])
      return r !== undefined ? elementAt(r.lens, i) : elementAt(target, k)
    })
    const ones = new Uint8Array(
      filledBuffer(
        spec.datatype,
        mine.reduce((a, b) => a * b, 1),
        1,
      ),
    )
    copyCorner(ones, mine, buf.subarray(i * rowElems * size, (i + 1) * rowElems * size), target, size)
  }
  return { type: ortType(spec.datatype), dims: [n, ...target], data: viewOf(spec.datatype, buf.buffer, rowElems * n) }
}

function checkTensor(model: string, spec: InputSpec, t: WireTensor): void {
  if (t.datatype !== spec.datatype) {
    throw new CohortError('INVALID_INPUT', `input "${spec.name}" of model "${model}" is ${spec.datatype}, got ${t.datatype}`)
  }
  const rest = t.shape.slice(1)
  const ok = rest.length === spec.rest.length && spec.rest.every((d, i) => d < 0 || d === rest[i])
  if (!ok) {
    const want = JSON.stringify([-1, ...spec.rest])
    throw new CohortError('INVALID_INPUT', `input "${spec.name}" of model "${model}" has shape ${want}, got ${JSON.stringify(t.shape)}`)
  }
}

function nestedShape(v: unknown): number[] {
  const shape: number[] = []
  let x = v
  while (Array.isArray(x)) {
    shape.push(x.length)
    x = x[0]
  }
  return shape
}

/** Concatenate each item's row of one input into an aligned batch tensor for ORT (padding rows that are shorter). */
function gather(spec: InputSpec, items: OnnxItem[], padValue: number): HostTensor {
  const first = inputOf(elementAt(items, 0).src, spec.name)
  let rest = first.shape.slice(1)
  let ragged = false
  for (const it of items) {
    const r = inputOf(it.src, spec.name).shape
    if (r.length - 1 !== rest.length || r.some((d, k) => k > 0 && d !== rest[k - 1])) {
      ragged = true
      rest = rest.map((d, k) => Math.max(d, r[k + 1] ?? 0))
    }
  }
  const dims = [items.length, ...rest]
  if (ragged && spec.datatype !== 'BYTES') {
    const rowElems = rest.reduce((a, b) => a * b, 1)
    const size = DATATYPE_SIZE[spec.datatype]
    const buf = filledBuffer(spec.datatype, rowElems * items.length, padValue)
    wireCounts.copies++
    const dst = new Uint8Array(buf)
    items.forEach((it, i) => {
      const src = inputOf(it.src, spec.name)
      const rowBytes = src.shape.slice(1).reduce((a, b) => a * b, 1) * size
      copyCorner(src.bytes.subarray(it.row * rowBytes, (it.row + 1) * rowBytes), src.shape.slice(1), dst.subarray(i * rowElems * size, (i + 1) * rowElems * size), rest, size)
    })
    return { type: ortType(spec.datatype), dims, data: viewOf(spec.datatype, buf, rowElems * items.length) }
  }
  if (spec.datatype === 'BYTES') {
    const data: string[] = []
    for (const it of items) {
      data.push(...(toValues(sliceRows(inputOf(it.src, spec.name), it.row, 1)) as string[]))
    }
    return { type: 'string', dims, data }
  }
  const rowElems = rest.reduce((a, b) => a * b, 1)
  const rowBytes = rowElems * DATATYPE_SIZE[spec.datatype]
  wireCounts.copies++ // the batch's input, in a buffer of its own that ORT's thread then owns (transferred)
  const buf = new ArrayBuffer(rowBytes * items.length)
  const dst = new Uint8Array(buf)
  let i = 0
  while (i < items.length) {
    // Copy runs of consecutive rows of one request in one go.
    const it = elementAt(items, i)
    const src = inputOf(it.src, spec.name)
    let j = i + 1
    while (j < items.length) {
      const next = elementAt(items, j)
      if (next.src !== it.src || next.row !== it.row + (j - i)) {
        break
      }
      j++
    }
    const from = it.row * rowBytes
    dst.set(src.bytes.subarray(from, from + (j - i) * rowBytes), i * rowBytes)
    i = j
  }
  return { type: ortType(spec.datatype), dims, data: viewOf(spec.datatype, buf, rowElems * items.length) }
}

/**
 * A fixed leading dim n > 1: the batch filled to n rows with copies of the first item (their
 * outputs are dropped after the run).
 */
function fillToFixed(given: OnnxItem[], fixed: number | undefined): OnnxItem[] {
  const first = given[0]
  if (fixed === undefined || first === undefined || given.length >= fixed) {
    return given
  }
  return [...given, ...new Array<OnnxItem>(fixed - given.length).fill(first)]
}

/** One input of a request's tensors; prepare() checked that every input is there. */
function inputOf(src: Record<string, WireTensor>, name: string): WireTensor {
  const t = src[name]
  if (t === undefined) {
    throw new CohortError('INTERNAL', `batch item has no input "${name}"`)
  }
  return t
}

/** The real lengths along a symbolic dim when the batch pads it, else undefined. */
function realOf(real: Map<string, { lens: number[]; max: number }>, dimName: string | null | undefined): { lens: number[]; max: number } | undefined {
  return dimName === null || dimName === undefined ? undefined : real.get(dimName)
}

function bytesOf(data: HostTensor['data']): Uint8Array {
  if (Array.isArray(data)) {
    return encodeBytesElements(data)
  }
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
}
