import { CohortError, toWireError, type InferRequest, type ModelMeta, type Subjects } from '@cohort/protocol'
import { fromWireValue, tensorGroupKey, toWireValue, type LeafStage, type StageRunner } from '@cohort/pipeline'
import { ItemError } from '@cohort/predictor'
import type { ItemResult, ModelRunner, PreparedItem } from '../runners/types.ts'

interface StagePayload {
  d: number
  v: unknown
}

/** Stage subjects of one pipeline stage, in the shape of a model's subjects. */
export function stageSubjects(base: Subjects, pipeline: string, stage: string): Subjects {
  const main = base.stage(pipeline, stage)
  return {
    ...base,
    infer: () => main,
    overflow: () => `${main}.overflow`,
    meta: () => `${main}.meta`,
    cancel: () => `${main}.cancel`,
    queue: () => base.stageQueue(pipeline, stage),
  }
}

/**
 * Serves ONE stage of a pipeline on its own subject (`cohort.stage.<pipeline>.<stage>`, queue
 * group `cohort.q.stage.<pipeline>.<stage>`) through the worker's ModelServer, so a stage worker
 * batches across every host that calls it. Items past their deadline are answered
 * DEADLINE_EXCEEDED without running. Not announced in the model directory.
 */
export class StageServerRunner implements ModelRunner {
  readonly name: string
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number }
  readonly announce = false
  readonly #pipeline: string
  readonly #stage: LeafStage
  readonly #inner: StageRunner
  readonly #abort = new AbortController()
  #ready = false

  /** `batch` overrides the stage's own batching (the worker's --max-batch-size, --max-delay-ms). */
  constructor(pipeline: string, stage: LeafStage, inner: StageRunner, batch: { maxBatchSize?: number; maxDelayMs?: number } = {}) {
    this.#pipeline = pipeline
    this.#stage = stage
    this.#inner = inner
    this.name = `${pipeline}.${stage.name}`
    this.batchDefaults = { ...stage.batch, ...batch }
  }

  get concurrency(): number {
    return this.#inner.concurrency
  }

  subjects(base: Subjects): Subjects {
    return stageSubjects(base, this.#pipeline, this.#stage.name)
  }

  async start(): Promise<void> {
    await this.#inner.start?.()
    this.#ready = true
  }

  meta(): ModelMeta {
    return {
      name: this.name,
      versions: ['1'],
      platform: this.#stage.kind === 'onnx' ? 'cohort_stage_onnx' : 'cohort_stage',
      inputs: [],
      outputs: [],
      kind: 'predictor',
      ready: this.#ready,
      maxBatchSize: this.batchDefaults.maxBatchSize,
      maxDelayMs: this.batchDefaults.maxDelayMs,
    }
  }

  prepare(req: InferRequest): PreparedItem[] {
    if (!req.items) {
      throw new CohortError('BAD_REQUEST', `stage ${this.name} takes items`)
    }
    return req.items.map((raw) => {
      try {
        const it = raw as Partial<StagePayload> | null
        if (typeof it !== 'object' || it === null || typeof it.d !== 'number' || !('v' in it)) {
          throw new CohortError('BAD_REQUEST', 'a stage item is {d: deadline, v: value}')
        }
        const v = fromWireValue(it.v)
        const s = this.#stage
        const group = s.kind === 'onnx' ? tensorGroupKey(v) : (s.group?.(v) ?? '')
        const cost = s.kind === 'ts' && s.cost ? s.cost(v) : 1
        return { group, cost, payload: { d: it.d, v } satisfies StagePayload }
      } catch (e) {
        return { group: '', payload: undefined, error: toWireError(e, 'BAD_REQUEST') }
      }
    })
  }

  async runBatch(payloads: unknown[]): Promise<ItemResult[]> {
    const items = payloads as StagePayload[]
    const now = Date.now()
    const out: ItemResult[] = new Array(items.length)
    const live: number[] = []
    items.forEach((it, i) => {
      if (it.d !== 0 && it.d <= now) {
        out[i] = { error: { code: 'DEADLINE_EXCEEDED', message: `deadline passed before stage ${this.#stage.name}; not run` } }
      } else {
        live.push(i)
      }
    })
    if (live.length > 0) {
      const rs = await this.#inner.run(
        live.map((i) => items[i]!.v),
        {
          pipeline: this.#pipeline,
          stage: this.#stage.name,
          batchSize: live.length,
          deadlines: live.map((i) => (items[i]!.d === 0 ? Infinity : items[i]!.d)),
          signal: this.#abort.signal,
        },
      )
      if (!Array.isArray(rs) || rs.length !== live.length) {
        throw new CohortError('PREDICTOR_FAILED', `stage ${this.#stage.name} returned ${Array.isArray(rs) ? rs.length : typeof rs} results for ${live.length} items`)
      }
      live.forEach((i, k) => {
        const r = rs[k]
        out[i] =
          r instanceof Error
            ? { error: { code: r instanceof ItemError ? r.code : 'PREDICTOR_FAILED', message: r.message } }
            : { json: toWireValue(r) }
      })
    }
    return out
  }

  async close(): Promise<void> {
    this.#abort.abort()
    await this.#inner.close?.()
  }
}
