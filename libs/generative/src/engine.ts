/**
 * The iteration-level scheduler (docs/generative.md#scheduler). Every step: drop cancelled and
 * expired sequences, preempt (recompute later) while the KV budget is exceeded, admit waiting
 * sequences (FCFS, by KV budget and max sequences), run ONE batched decode over every decoding
 * sequence (one token each), then prefill admitted prompts in chunks under the step's token budget
 * (batch 1 each: GroupQueryAttention runs multi-token steps with a past only at batch 1), sample,
 * and send each sequence's delta. Finished sequences leave at once; their slab rows are reused the
 * next step.
 * @module
 */
import {
  CohortError,
  type FinishReason,
  type GenerateInput,
  type GenerateResult,
  type GenerationSink,
  type GenerativeInfo,
  type GenerativeSlo,
  type Generator,
  type GeneratorGauges,
  type TokenLogprob,
  type WireError,
} from '@cohort/protocol'
import { KvSlab } from './kv-slab.ts'
import { emptyMetrics, type EngineMetrics, type EngineObserver } from './metrics.ts'
import { argmax, sampleToken } from './sampling.ts'
import { generated, makeSeq, type Seq } from './sequence.ts'
import { OPTIMUM_NAMES, type DecoderNames, type DecoderSession, type DecoderSpec, type TensorLike } from './session.ts'
import { tokenPiece, type Tokenizer } from './text.ts'

/** Options of {@link Engine}. */
export interface EngineOptions {
  session: DecoderSession
  model: DecoderSpec
  tokenizer: Tokenizer
  /** Most sequences resident (slab rows). @default 16 */
  maxSequences?: number
  /** KV tokens the resident sequences may hold together; at least `maxContext`. @default maxSequences x maxContext */
  kvBudgetTokens?: number
  /** Tokens per step: one per decoding sequence, the rest for prefill chunks (at least 1). @default 256 */
  maxStepTokens?: number
  /**
   * `'continuous'`: sequences join at any step. `'request'`: request-level batching, a new batch is
   * admitted only once every resident sequence has finished (for comparison, bench generate).
   * @default 'continuous'
   */
  batching?: 'continuous' | 'request'
  /**
   * A time-to-first-token budget from submit for every sequence, on top of each request's own
   * `firstTokenDeadline` (the earlier one applies; the rule is the same, see {@link Engine}).
   * @default undefined (only the request's)
   */
  ttftTimeoutMs?: number
  /**
   * The server SLO announced in `info.slo` (model metadata): the gateway gives a generation whose
   * client sets no budget `ttftMs` to its first token and `generationMs` in all. The engine enforces
   * the deadlines requests carry, not these. Fields not given keep their defaults: `ttftMs`
   * {@link DEFAULT_TTFT_SLO_MS}, no `generationMs` (the gateway's request timeout).
   */
  slo?: GenerativeSlo
  /** Epoch ms with sub-ms resolution; deadlines are on this clock. @default performance.timeOrigin + performance.now() */
  now?: () => number
  observer?: EngineObserver
}

const defaultNow = (): number => performance.timeOrigin + performance.now()

/** The default time-to-first-token SLO a generative model announces, ms. */
export const DEFAULT_TTFT_SLO_MS = 10_000

function fill(template: string, i: number): string {
  return template.replace('{i}', String(i))
}

/** The continuous-batching generation engine; a {@link Generator}. Call `start()` to run its loop, or `step()` by hand (tests). */
export class Engine implements Generator {
  readonly info: GenerativeInfo
  readonly #s: DecoderSession
  readonly #m: DecoderSpec
  readonly #names: DecoderNames
  readonly #tok: Tokenizer
  readonly #maxSeqs: number
  readonly #budget: number
  readonly #stepTokens: number
  readonly #mode: 'continuous' | 'request'
  readonly #ttft: number | undefined
  readonly #now: () => number
  /** The `observer` option, then those added by `watch`. */
  readonly #obs: EngineObserver[]
  readonly #slab: KvSlab
  readonly #metrics: EngineMetrics
  /** Waiting sequences, by id (arrival). */
  #waiting: Seq[] = []
  /** Decoding sequences; rows [0, n). */
  #decode: Seq[] = []
  /** Prefilling sequences in admission order; rows [decode.length, decode.length + n). */
  #prefill: Seq[] = []
  #byRow: (Seq | undefined)[]
  /** Past and present names per layer: [pastKey, pastValue, presentKey, presentValue]. */
  readonly #kvNames: [string, string, string, string][]
  /**
   * Feed buffers reused every step (a session reads them only during its run): input_ids and
   * position_ids, written through int32 views (values < 2^31, little-endian high word 0, so no
   * BigInt per value); the mask after `maxContext` ones and `maxContext` zeros in one buffer, so a
   * mask row is one `copyWithin` (grown as needed).
   */
  readonly #ids: BigInt64Array
  readonly #ids32: Int32Array
  readonly #pos: BigInt64Array
  readonly #pos32: Int32Array
  #mask: BigInt64Array = new BigInt64Array(0)
  #nextId = 1
  #closed = false
  #loop: Promise<void> | undefined
  #wake: (() => void) | undefined

  constructor(o: EngineOptions) {
    this.#s = o.session
    this.#m = o.model
    this.#names = { ...OPTIMUM_NAMES, ...o.model.names }
    this.#tok = o.tokenizer
    this.#maxSeqs = o.maxSequences ?? 16
    this.#budget = o.kvBudgetTokens ?? this.#maxSeqs * o.model.maxContext
    this.#stepTokens = o.maxStepTokens ?? 256
    this.#mode = o.batching ?? 'continuous'
    this.#ttft = o.ttftTimeoutMs
    this.#now = o.now ?? defaultNow
    this.#obs = o.observer ? [o.observer] : []
    if (!(Number.isInteger(this.#maxSeqs) && this.#maxSeqs >= 1)) throw new RangeError(`maxSequences must be an integer >= 1, got ${this.#maxSeqs}`)
    if (!(this.#budget >= o.model.maxContext)) throw new RangeError(`kvBudgetTokens (${this.#budget}) must be at least maxContext (${o.model.maxContext})`)
    if (!(Number.isInteger(this.#stepTokens) && this.#stepTokens >= 1)) throw new RangeError(`maxStepTokens must be an integer >= 1, got ${this.#stepTokens}`)
    this.#slab = new KvSlab(this.#maxSeqs, 2 * o.model.layers, o.model.kvHeads, o.model.headDim, o.model.maxContext)
    this.#byRow = Array<Seq | undefined>(this.#maxSeqs).fill(undefined)
    // a step runs at most maxSequences decode rows, or a prefill chunk of at most maxStepTokens (and maxContext) tokens
    const feedLen = Math.max(this.#maxSeqs, Math.min(this.#stepTokens, o.model.maxContext))
    this.#ids = new BigInt64Array(feedLen)
    this.#ids32 = new Int32Array(this.#ids.buffer)
    this.#pos = new BigInt64Array(feedLen)
    this.#pos32 = new Int32Array(this.#pos.buffer)
    const n = this.#names
    this.#kvNames = Array.from({ length: o.model.layers }, (_, i) => [fill(n.pastKey, i), fill(n.pastValue, i), fill(n.presentKey, i), fill(n.presentValue, i)])
    this.#metrics = emptyMetrics(this.#budget)
    const slo: GenerativeSlo = { ttftMs: DEFAULT_TTFT_SLO_MS, ...o.slo }
    for (const [k, v] of Object.entries(slo)) {
      if (v !== undefined && !(typeof v === 'number' && v > 0)) throw new RangeError(`slo.${k} must be a positive number of ms, got ${String(v)}`)
    }
    this.info = { maxContext: o.model.maxContext, vocabSize: o.model.vocabSize, slo }
  }

  /** Starts a generation (sync); throws INVALID_INPUT for a request that can never run, SHUTTING_DOWN once closed. */
  submit(input: GenerateInput, deadline: number, sink: GenerationSink): { cancel(): void } {
    if (this.#closed) throw new CohortError('SHUTTING_DOWN', 'the generator is closed')
    const seq = makeSeq(this.#nextId++, input, deadline, sink, this.#now(), {
      tokenizer: this.#tok,
      vocabSize: this.#m.vocabSize,
      maxContext: this.#m.maxContext,
      eosId: this.#m.eosId,
    })
    this.#waiting.push(seq)
    this.#metrics.waiting = this.#waiting.length
    this.#wake?.()
    return {
      cancel: () => {
        if (seq.state !== 'done') seq.cancelled = true
        this.#wake?.()
      },
    }
  }

  /** Adds an observer (metrics exporters; the `observer` option is the first). */
  watch(o: EngineObserver): void {
    this.#obs.push(o)
  }

  /** The scheduler's state now, for metrics (the Generator hook; {@link metrics} has every figure). */
  gauges(): GeneratorGauges {
    const m = this.#metrics
    return { running: m.running, waiting: m.waiting, kvTokens: m.kvTokens, kvBudgetTokens: m.kvBudgetTokens, preemptions: m.preemptions }
  }

  /** Counters and gauges, as plain numbers (a live object: read, do not keep). */
  metrics(): EngineMetrics {
    return this.#metrics
  }

  /** Sequences waiting, prefilling and decoding (tests count slots with it). */
  get counts(): { waiting: number; prefill: number; decode: number; freeSlots: number } {
    const resident = this.#decode.length + this.#prefill.length
    return { waiting: this.#waiting.length, prefill: this.#prefill.length, decode: this.#decode.length, freeSlots: this.#maxSeqs - resident }
  }

  /** True while any sequence waits or runs. */
  get busy(): boolean {
    return this.#waiting.length + this.#decode.length + this.#prefill.length > 0
  }

  /** Runs steps while there is work, until closed (idempotent). */
  start(): void {
    this.#loop ??= (async () => {
      while (!this.#closed) {
        if (!this.busy) {
          await new Promise<void>((r) => (this.#wake = r))
          this.#wake = undefined
          continue
        }
        await this.step()
      }
    })()
  }

  /** Idempotent: ends every generation with a retryable WORKER_LOST error and stops the loop. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true
      const all = [...this.#waiting, ...this.#decode, ...this.#prefill]
      this.#waiting = []
      this.#decode = []
      this.#prefill = []
      this.#byRow.fill(undefined)
      for (const s of all) this.#fail(s, { code: 'WORKER_LOST', message: 'the generator closed before the generation ended', retryAfterS: 1 })
      this.#gauges()
      this.#wake?.()
    }
    await this.#loop
  }

  /** `#closed` read through a call: close() may have run during a step's awaits (TypeScript keeps a field's narrowing across them). */
  #isClosed(): boolean {
    return this.#closed
  }

  /** One iteration. Returns whether work remains. */
  async step(): Promise<boolean> {
    if (this.#closed) return false
    const t0 = this.#now()
    this.#sweep(t0)
    this.#preempt()
    this.#admit()
    let runMs = 0
    let prefillTokens = 0
    const decodeRows = this.#decode.length
    if (decodeRows > 0) {
      this.#metrics.decodeSteps++
      this.#metrics.decodeRowsSum += decodeRows
      runMs += await this.#decodeStep()
    }
    let left = Math.max(1, this.#stepTokens - decodeRows)
    for (const s of [...this.#prefill]) {
      if (left <= 0 || this.#isClosed()) break
      const target = s.tokens.length - (s.sampled > 0 ? 1 : 0)
      const chunk = Math.min(target - s.cached, left)
      left -= chunk
      prefillTokens += chunk
      runMs += await this.#prefillStep(s, chunk, target)
    }
    this.#flush()
    this.#gauges()
    const stepMs = this.#now() - t0
    this.#metrics.steps++
    this.#metrics.stepMsSum += stepMs
    this.#metrics.runMsSum += runMs
    for (const o of this.#obs) o.step?.({ decodeRows, prefillTokens, runMs, stepMs })
    return this.busy
  }

  /**
   * Drops cancelled sequences and applies the deadlines (docs/generative.md#deadlines-and-the-server-slo):
   * past its deadline a sequence ends with finish reason `deadline` (its output so far) once it has
   * a token, else fails 504 DEADLINE_EXCEEDED; with no first token at its first-token deadline, it
   * fails 503 OVERLOADED (retryable) while waiting for a slot or while prefilling at a pace that
   * would have made it alone, and 504 DEADLINE_EXCEEDED when its own prefill alone takes longer than
   * that budget (a retry cannot help).
   */
  #sweep(now: number): void {
    for (const s of [...this.#waiting, ...this.#decode, ...this.#prefill]) {
      if (s.cancelled) {
        this.#remove(s)
        this.#finish(s, 'cancelled')
        continue
      }
      if (now >= s.deadline) {
        this.#remove(s)
        if (s.firstTokenAt !== undefined) {
          this.#finish(s, 'deadline')
        } else {
          this.#fail(s, { code: 'DEADLINE_EXCEEDED', message: 'the deadline passed before the first token' })
        }
        continue
      }
      if (s.firstTokenAt !== undefined) continue
      const ttftAt = Math.min(s.firstTokenDeadline ?? Infinity, this.#ttft !== undefined ? s.submittedAt + this.#ttft : Infinity)
      if (now >= ttftAt) {
        const e = this.#ttftError(s, ttftAt - s.submittedAt)
        this.#remove(s)
        this.#fail(s, e)
      }
    }
  }

  /** The refusal of a sequence with no first token at its first-token deadline (`budget` ms after submit). */
  #ttftError(s: Seq, budget: number): WireError {
    const ms = Math.round(budget)
    if (s.state === 'waiting') {
      const ahead = this.#waiting.indexOf(s)
      return {
        code: 'OVERLOADED',
        message: `no slot within the time-to-first-token budget of ${Math.round(ms)} ms (${this.#decode.length + this.#prefill.length} sequences running, ${ahead} waiting ahead); retry later or on another worker`,
        retryAfterS: 1,
      }
    }
    // Prefilling: its own runs so far tell how long its whole prompt takes alone.
    const alone = s.cached > 0 ? (s.prefillMs / s.cached) * s.promptLen : 0
    if (alone >= budget) {
      return {
        code: 'DEADLINE_EXCEEDED',
        message: `the prompt of ${s.promptLen} tokens takes about ${Math.round(alone)} ms to prefill, not less than its time-to-first-token budget of ${ms} ms: shorten the prompt or raise the budget (x-cohort-ttft-timeout-ms)`,
      }
    }
    return {
      code: 'OVERLOADED',
      message: `still prefilling (${s.cached} of ${s.promptLen} prompt tokens) at the end of the time-to-first-token budget of ${Math.round(ms)} ms; retry later or on another worker`,
      retryAfterS: 1,
    }
  }

  /** KV tokens the resident sequences hold after this step. */
  #kvUsed(): number {
    let n = 0
    for (const s of this.#decode) n += s.tokens.length
    for (const s of this.#prefill) n += s.tokens.length
    return n
  }

  /** Preempts the most recently admitted sequences (recompute later) while the budget is exceeded. */
  #preempt(): void {
    while (this.#kvUsed() > this.#budget) {
      const all = [...this.#decode, ...this.#prefill]
      const victim = all.reduce((a, b) => (b.id > a.id ? b : a))
      this.#remove(victim)
      victim.state = 'waiting'
      victim.cached = 0
      victim.prefillMs = 0
      victim.preemptions++
      this.#metrics.preemptions++
      const at = this.#waiting.findIndex((w) => w.id > victim.id)
      this.#waiting.splice(at < 0 ? this.#waiting.length : at, 0, victim)
    }
  }

  #admit(): void {
    if (this.#mode === 'request' && this.#decode.length + this.#prefill.length > 0) return
    let used = this.#kvUsed()
    while (this.#waiting.length > 0 && this.#decode.length + this.#prefill.length < this.#maxSeqs) {
      const s = this.#waiting[0] as Seq
      if (used + s.tokens.length > this.#budget) break
      this.#waiting.shift()
      used += s.tokens.length
      s.state = 'prefill'
      s.cached = 0
      s.row = this.#decode.length + this.#prefill.length
      this.#byRow[s.row] = s
      this.#prefill.push(s)
    }
  }

  #lens(): number[] {
    const n = this.#decode.length + this.#prefill.length
    return Array.from({ length: n }, (_, r) => this.#byRow[r]?.cached ?? 0)
  }

  #relocate(s: Seq, to: number): void {
    this.#slab.move(s.row, to, s.cached)
    this.#byRow[s.row] = undefined
    this.#byRow[to] = s
    s.row = to
  }

  /** Takes a sequence out of the waiting list or its slab row, keeping the rows compact. */
  #remove(s: Seq): void {
    if (s.state === 'waiting') {
      this.#waiting = this.#waiting.filter((w) => w !== s)
    } else if (s.state === 'decode') {
      const lastD = this.#decode.length - 1
      const last = this.#byRow[lastD] as Seq
      if (last !== s) this.#relocate(last, s.row)
      else this.#byRow[s.row] = undefined
      this.#decode = this.#decode.filter((d) => d !== s)
      if (this.#prefill.length > 0) this.#relocate(this.#byRow[lastD + this.#prefill.length] as Seq, lastD)
    } else if (s.state === 'prefill') {
      const lastRow = this.#decode.length + this.#prefill.length - 1
      const last = this.#byRow[lastRow] as Seq
      if (last !== s) this.#relocate(last, s.row)
      else this.#byRow[s.row] = undefined
      this.#prefill = this.#prefill.filter((p) => p !== s)
    }
    s.row = -1
  }

  /** A prefilled sequence joins the decode rows. */
  #promote(s: Seq): void {
    const to = this.#decode.length
    if (s.row !== to) {
      const other = this.#byRow[to] as Seq
      this.#slab.swap(s.row, to)
      this.#byRow[s.row] = other
      other.row = s.row
      this.#byRow[to] = s
      s.row = to
    }
    this.#prefill = this.#prefill.filter((p) => p !== s)
    this.#decode.push(s)
    s.state = 'decode'
  }

  /**
   * Feeds and fetches of one run over slab rows `[first, first + rows)`, `seqLen` tokens each:
   * `input_ids` and `position_ids` are in `this.#ids` / `this.#pos` (filled by the caller), the
   * mask has `lens[r]` ones in row r of `width` columns. The tensors are views of buffers reused
   * every step; past and present are the same slab views.
   */
  #feeds(
    rows: number,
    seqLen: number,
    width: number,
    lens: (r: number) => number,
    first: number,
  ): { feeds: Record<string, TensorLike>; fetches: Record<string, TensorLike | null> } {
    const n = this.#names
    const count = rows * seqLen
    const ctx = this.#m.maxContext
    const at = 2 * ctx
    if (this.#mask.length < at + rows * width) {
      this.#mask = new BigInt64Array(at + Math.max(rows * width, 2 * (this.#mask.length - at)))
      this.#mask.fill(1n, 0, ctx)
    }
    const buf = this.#mask
    // row r: `len` ones then zeros, = the template [ones | zeros] from ctx - len
    for (let r = 0; r < rows; r++) {
      const len = lens(r)
      buf.copyWithin(at + r * width, ctx - len, ctx - len + width)
    }
    const mask = buf.subarray(at, at + rows * width)
    const feeds: Record<string, TensorLike> = {
      [n.inputIds]: { type: 'int64', data: this.#ids.subarray(0, count), dims: [rows, seqLen] },
      [n.attentionMask]: { type: 'int64', data: mask, dims: [rows, width] },
    }
    if (n.positionIds !== '') feeds[n.positionIds] = { type: 'int64', data: this.#pos.subarray(0, count), dims: [rows, seqLen] }
    const fetches: Record<string, TensorLike | null> = { [n.logits]: null }
    const views = this.#slab.views(first, rows)
    for (let i = 0; i < this.#kvNames.length; i++) {
      const [pk, pv, ck, cv] = this.#kvNames[i] as [string, string, string, string]
      const k = views[2 * i] as TensorLike
      const v = views[2 * i + 1] as TensorLike
      feeds[pk] = k
      feeds[pv] = v
      fetches[ck] = k
      fetches[cv] = v
    }
    return { feeds, fetches }
  }

  async #run(seqs: Seq[], feeds: Record<string, TensorLike>, fetches: Record<string, TensorLike | null>): Promise<{ logits: Float32Array | undefined; ms: number }> {
    const t0 = this.#now()
    try {
      const out = await this.#s.run(feeds, fetches)
      this.#metrics.sessionRuns++
      const logits = out[this.#names.logits]
      if (!logits || !(logits.data instanceof Float32Array)) throw new Error(`the session returned no float32 ${this.#names.logits}`)
      return { logits: logits.data, ms: this.#now() - t0 }
    } catch (e) {
      for (const s of seqs) {
        if (s.state === 'done') continue
        this.#remove(s)
        this.#fail(s, { code: 'INTERNAL', message: `the model run failed: ${e instanceof Error ? e.message : String(e)}` })
      }
      return { logits: undefined, ms: this.#now() - t0 }
    }
  }

  /** input_ids[i] = token, position_ids[i] = position (both >= 0 and < 2^31). */
  #setFeed(i: number, token: number, position: number): void {
    this.#ids32[2 * i] = token
    this.#ids32[2 * i + 1] = 0
    this.#pos32[2 * i] = position
    this.#pos32[2 * i + 1] = 0
  }

  async #decodeStep(): Promise<number> {
    // batch row r is slab row r (the decode array is not in row order after a removal)
    const rows = this.#decode.length
    const seqs = this.#byRow.slice(0, rows) as Seq[]
    let need = 0
    for (let r = 0; r < rows + this.#prefill.length; r++) need = Math.max(need, (this.#byRow[r]?.cached ?? 0) + (r < rows ? 1 : 0))
    if (!this.#slab.fits(need)) this.#slab.fit(need, this.#lens())
    let width = 0
    for (let r = 0; r < rows; r++) {
      const s = seqs[r] as Seq
      this.#setFeed(r, s.tokens[s.cached] as number, s.cached)
      width = Math.max(width, s.cached + 1)
    }
    const { feeds, fetches } = this.#feeds(rows, 1, width, (r) => (seqs[r] as Seq).cached + 1, 0)
    const { logits, ms } = await this.#run(seqs, feeds, fetches)
    if (logits === undefined) return ms
    const v = this.#m.vocabSize
    const now = this.#now()
    const ended: Seq[] = []
    for (let r = 0; r < rows; r++) {
      const s = seqs[r] as Seq
      if (s.state !== 'decode') continue
      s.cached++
      if (this.#sample(s, logits, r * v, now)) ended.push(s)
    }
    for (const s of ended) this.#end(s)
    return ms
  }

  async #prefillStep(s: Seq, chunk: number, target: number): Promise<number> {
    if (s.state !== 'prefill') return 0
    this.#slab.fit(s.cached + chunk, this.#lens())
    for (let i = 0; i < chunk; i++) this.#setFeed(i, s.tokens[s.cached + i] as number, s.cached + i)
    const width = s.cached + chunk
    const { feeds, fetches } = this.#feeds(1, chunk, width, () => width, s.row)
    const { logits, ms } = await this.#run([s], feeds, fetches)
    if (logits === undefined || !isPrefilling(s)) return ms
    s.cached += chunk
    s.prefillMs += ms
    this.#metrics.prefillTokens += chunk
    if (s.cached < target) return ms
    if (s.cached === s.tokens.length) {
      const v = this.#m.vocabSize
      if (this.#sample(s, logits, (chunk - 1) * v, this.#now())) {
        this.#end(s)
        return ms
      }
    }
    this.#promote(s)
    return ms
  }

  /** Samples the next token of `s` from the row of `logits` at `at`, produced at `now`; returns true when the generation is over. */
  #sample(s: Seq, logits: Float32Array, at: number, now: number): boolean {
    const v = this.#m.vocabSize
    // Greedy without logprobs needs no row view nor result object.
    const greedy = s.sampler.temperature <= 0 && s.sampler.logprobs === undefined
    let token: number
    let logprob: TokenLogprob | undefined
    if (greedy) token = argmax(logits, at, v)
    else ({ token, logprob } = sampleToken(logits.subarray(at, at + v), s.sampler, s.rng))
    s.sampled++
    this.#metrics.generatedTokens++
    if (s.firstTokenAt === undefined) {
      s.firstTokenAt = now
      this.#metrics.ttftCount++
      this.#metrics.ttftMsSum += now - s.submittedAt
      for (const o of this.#obs) o.firstToken?.(now - s.submittedAt)
    }
    s.lastTokenAt = now
    if (token === s.eos || s.stopIds.has(token)) {
      s.finishReason = 'stop'
      return true
    }
    s.tokens.push(token)
    s.newTokens.push(token)
    if (logprob) {
      Object.assign(logprob, tokenPiece(this.#tok, token))
      for (const t of logprob.top ?? []) Object.assign(t, tokenPiece(this.#tok, t.token))
      s.newLogprobs.push(logprob)
      s.logprobs?.push(logprob)
    }
    if (s.text.push(token)) {
      s.finishReason = 'stop'
      return true
    }
    if (generated(s) >= s.maxTokens) {
      s.finishReason = 'length'
      return true
    }
    return false
  }

  #end(s: Seq): void {
    this.#remove(s)
    this.#finish(s, s.finishReason ?? 'stop')
  }

  /** Sends each live sequence's delta of this step. */
  #flush(): void {
    for (const s of [...this.#decode, ...this.#prefill]) this.#delta(s, false)
  }

  #delta(s: Seq, final: boolean): void {
    if (!s.stream) return
    const text = s.text.take(final)
    if (s.newTokens.length === 0 && text === '') return
    const d = s.newLogprobs.length > 0 ? { tokens: s.newTokens, text, logprobs: s.newLogprobs } : { tokens: s.newTokens, text }
    s.newTokens = []
    s.newLogprobs = []
    try {
      s.sink.delta(d)
    } catch {
      // A sink that throws must not stop the other sequences.
    }
  }

  #finish(s: Seq, reason: FinishReason): void {
    this.#delta(s, true)
    // Decode what is still held (an incomplete character) for non-streamed sequences too, so the
    // final text is the same whether the request streamed or not.
    if (!s.stream) s.text.take(true)
    s.state = 'done'
    const out = s.tokens.slice(s.promptLen)
    const r: GenerateResult = {
      text: s.text.text,
      tokens: out,
      finishReason: reason,
      usage: { promptTokens: s.promptLen, completionTokens: s.sampled },
      ...(s.logprobs ? { logprobs: s.logprobs } : {}),
    }
    this.#account(s, reason)
    try {
      s.sink.done(r)
    } catch {
      // ignored, as in #delta
    }
  }

  #fail(s: Seq, e: WireError): void {
    s.state = 'done'
    this.#account(s, 'error')
    try {
      s.sink.error(e)
    } catch {
      // ignored, as in #delta
    }
  }

  #account(s: Seq, reason: FinishReason | 'error'): void {
    const m = this.#metrics
    m.finished[reason]++
    const now = this.#now()
    let tpot: number | undefined
    if (s.firstTokenAt !== undefined && s.lastTokenAt !== undefined && s.sampled > 1) {
      tpot = (s.lastTokenAt - s.firstTokenAt) / (s.sampled - 1)
      m.tpotCount++
      m.tpotMsSum += tpot
    }
    const info = {
      reason,
      promptTokens: s.promptLen,
      completionTokens: s.sampled,
      ttftMs: s.firstTokenAt === undefined ? undefined : s.firstTokenAt - s.submittedAt,
      tpotMs: tpot,
      e2eMs: now - s.submittedAt,
      preemptions: s.preemptions,
    }
    for (const o of this.#obs) o.finished?.(info)
  }

  #gauges(): void {
    const m = this.#metrics
    m.running = this.#decode.length + this.#prefill.length
    m.waiting = this.#waiting.length
    m.kvTokens = 0
    for (const x of [...this.#decode, ...this.#prefill]) m.kvTokens += x.cached
    m.kvUsage = m.kvTokens / this.#budget
    m.kvSlabBytes = this.#slab.bytes
    m.kvRowMoves = this.#slab.moves
    m.kvSlabResizes = this.#slab.resizes
  }
}

/** Whether `s` is still in prefill, read through a call: a run's await may have cancelled or preempted it. */
function isPrefilling(s: Seq): boolean {
  return s.state === 'prefill'
}
