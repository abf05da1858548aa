import { CohortError, toWireError, type InferRequest, type ModelMeta } from '@cohort/protocol'
import { schemaToTensorMeta, tensorsToItems, validateItem, type Predictor } from '@cohort/predictor'
import { Value } from '@sinclair/typebox/value'
import { InlineExec, ThreadExec, type PredictorExec } from './predictor-exec.ts'
import { TimeLimits, type ItemResult, type ModelRunner, type PreparedItem, type RestartReason, type RunBatchOptions, type RunnerEvents } from './types.ts'

/** Plain JSON copy of a TypeBox schema (drops its symbol keys). */
function plainSchema(s: unknown): unknown {
  return s === undefined ? undefined : JSON.parse(JSON.stringify(s))
}

/** Options of {@link PredictorRunner}. */
export interface PredictorRunnerOptions {
  maxBatchSize?: number
  maxDelayMs?: number
  /**
   * The module the predictor was loaded from (`--predictor FILE`). When set, setup() and predict()
   * run in a worker thread of their own that imports this module again, so a long synchronous
   * predict() never blocks the worker's main thread (NATS I/O, heartbeats); inputs and outputs then
   * cross by structured clone (docs/architecture.md#predictor-threads). @default run in the calling thread
   */
  modulePath?: string
  /**
   * The model name it is served as (a repository serves a module under its folder's name).
   * @default the predictor's own name
   */
  name?: string
}

/** First wait before a replacement whose setup() failed is tried again, ms (doubles up to 30 s). */
const RESTART_RETRY_MS = 500

/**
 * Runs a TypeScript predictor made with `definePredictor`: in a worker thread when it was loaded
 * from a module path, else in the calling thread. A batch past its time limit, or a thread that
 * died, gets a fresh thread (and setup()) while the model reports not ready.
 */
export class PredictorRunner implements ModelRunner {
  readonly name: string
  readonly concurrency = 1
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number }
  readonly #p: Predictor
  readonly #modulePath: string | undefined
  /** Its batches' time limits, on one timer. */
  readonly #limits = new TimeLimits()
  #exec: PredictorExec
  #ready = false
  #closed = false
  #restarting: Promise<void> | undefined
  #events: RunnerEvents | undefined
  #meta: ModelMeta | undefined

  constructor(p: Predictor, overrides: PredictorRunnerOptions = {}) {
    this.#p = p
    this.name = overrides.name ?? p.name
    this.#modulePath = overrides.modulePath
    this.batchDefaults = {
      maxBatchSize: overrides.maxBatchSize ?? p.batch.maxBatchSize,
      maxDelayMs: overrides.maxDelayMs ?? p.batch.maxDelayMs,
    }
    this.#exec = this.#makeExec()
  }

  /** True when predict() runs in a worker thread. */
  get threaded(): boolean {
    return this.#modulePath !== undefined
  }

  observe(events: RunnerEvents): void {
    this.#events = events
  }

  async start(): Promise<void> {
    await this.#exec.start()
    this.#ready = true
  }

  meta(): ModelMeta {
    if (this.#meta?.ready === this.#ready) {
      return this.#meta
    }
    this.#meta = {
      name: this.name,
      versions: ['1'],
      platform: 'cohort_predictor',
      inputs: schemaToTensorMeta(this.#p.input, 'input'),
      outputs: schemaToTensorMeta(this.#p.output, 'output'),
      kind: 'predictor',
      ready: this.#ready,
      maxBatchSize: this.batchDefaults.maxBatchSize,
      maxDelayMs: this.batchDefaults.maxDelayMs,
      inputSchema: plainSchema(this.#p.input),
      ...(this.#p.output ? { outputSchema: plainSchema(this.#p.output) } : {}),
    }
    return this.#meta
  }

  prepare(req: InferRequest): PreparedItem[] {
    const raw = requestItems(req)
    return raw.map((item, i) => {
      try {
        const payload = validateItem(this.#p.input, item, i)
        return { group: '', cost: this.#p.cost(payload), payload }
      } catch (e) {
        return { group: '', payload: undefined, error: toWireError(e, 'INVALID_INPUT') }
      }
    })
  }

  async runBatch(payloads: unknown[], _signal?: AbortSignal, opts: RunBatchOptions = {}): Promise<ItemResult[]> {
    if (this.#restarting) {
      await this.#restarting
    }
    if (this.#closed) {
      throw new CohortError('SHUTTING_DOWN', `predictor ${this.name} is closed`)
    }
    const exec = this.#exec
    const out = await this.#limits.run(
      exec.run(payloads),
      opts.timeoutMs,
      `a batch of ${payloads.length} items of ${this.name}`,
      () =>
        // The batch's caller gets BATCH_TIMEOUT now; the restart runs on (the next batch waits for it).
        void this.#restart(exec, 'batch_timeout', `a batch of ${payloads.length} items ran past ${opts.timeoutMs} ms`),
    )
    const schema = this.#p.output
    return out.map((r, i): ItemResult => {
      if ('e' in r) {
        return { error: r.e }
      }
      if (schema && !Value.Check(schema, r.v)) {
        const first = Value.Errors(schema, r.v).First()
        return {
          error: {
            code: 'PREDICTOR_FAILED',
            message: `predictor ${this.name} returned an output for item ${i} that does not match its output schema: ${first?.path || '/'}: ${first?.message ?? 'mismatch'}`,
          },
        }
      }
      return { json: r.v }
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    this.#ready = false
    await this.#restarting
    await this.#exec.close()
  }

  #makeExec(): PredictorExec {
    const exec = this.#modulePath ? new ThreadExec(this.#modulePath, this.#p.name, this.name) : new InlineExec(this.#p, this.name)
    exec.onDied = (why) => void this.#restart(exec, 'died', why)
    return exec
  }

  /** Replace `old` (once): end it, start a new one until its setup() succeeds or the runner closes. */
  #restart(old: PredictorExec, reason: RestartReason, detail: string): Promise<void> {
    if (old !== this.#exec || this.#closed) {
      return this.#restarting ?? Promise.resolve()
    }
    this.#ready = false
    this.#events?.restarting(reason, detail)
    const t0 = performance.now()
    const p = (async () => {
      // Do not wait for an inline predictor's teardown behind a promise that never settles.
      void old.kill().catch(() => undefined)
      for (let retry = RESTART_RETRY_MS; !this.#closed; retry = Math.min(30_000, retry * 2)) {
        const exec = this.#makeExec()
        this.#exec = exec
        try {
          await exec.start()
          this.#ready = !this.#closed
          this.#events?.restarted(reason, performance.now() - t0)
          return
        } catch (e) {
          void exec.kill()
          this.#events?.restartFailed(reason, e, retry)
          await new Promise((r) => setTimeout(r, retry))
        }
      }
    })().finally(() => {
      this.#restarting = undefined
    })
    this.#restarting = p
    return p
  }
}

/** The JSON items of a request: `items`, or one item per row of its tensors. 400 when it has neither. */
export function requestItems(req: InferRequest): unknown[] {
  if (req.items) {
    return req.items
  }
  if (req.tensors) {
    const first = Object.values(req.tensors)[0]
    return tensorsToItems(req.tensors, first?.shape[0] ?? 0)
  }
  throw new CohortError('BAD_REQUEST', 'request has neither tensors nor items')
}
