import { CohortError, toWireError, type InferRequest, type ModelMeta, type Subjects } from '@cohort/protocol'
import { decodeStagePart, encodeStageResults, fromWireValue, sameTensorLayout, tensorGroupKey, toWireValue, type LeafStage, type StageRunner } from '@cohort/pipeline'
import { ItemError } from '@cohort/predictor'
import type { ItemResult, ModelRunner, PreparedItem } from '../runners/types.ts'
import { elementAt } from '../element-at.ts'

/** One queued part: a host's stage batch (or, `legacy`, one `{d, v}` item of an older host). */
interface StagePayload {
  items: unknown[]
  /** Per item, epoch ms (Infinity: none). */
  deadlines: number[]
  legacy: boolean
}

/** A request item as a part: `{d, b}` (a columnar batch, `decodeStagePart`) or `{d, v}` (one item). */
function stagePayload(raw: unknown): StagePayload {
  const it = raw as { d?: unknown; v?: unknown; b?: unknown } | null
  if (typeof it === 'object' && it !== null && 'b' in it) {
    try {
      return { ...decodeStagePart(it), legacy: false }
    } catch (e) {
      throw new CohortError('BAD_REQUEST', e instanceof Error ? e.message : String(e))
    }
  }
  if (typeof it !== 'object' || it === null || typeof it.d !== 'number' || !('v' in it)) {
    throw new CohortError('BAD_REQUEST', 'a stage part is {d: deadline(s), b: batch} (or one item, {d: deadline, v: value})')
  }
  return { items: [fromWireValue(it.v)], deadlines: [it.d === 0 ? Infinity : it.d], legacy: true }
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
  /**
   * Batching of the stage: `maxBatchSize` items per batch. A queue entry is a part (one host's
   * stage batch) whose cost is its item count, so `maxBatchCost` = `maxBatchSize` bounds the items
   * of a batch of parts.
   */
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number; maxBatchCost: number }
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
    const b = { ...stage.batch, ...batch }
    this.batchDefaults = { ...b, maxBatchCost: b.maxBatchSize }
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
        const part = stagePayload(raw)
        const s = this.#stage
        // A part is one batch of the host's stage engine: one group (the host grouped it).
        let group = ''
        let cost = 0
        let prev: unknown
        part.items.forEach((v, i) => {
          const g = s.kind === 'onnx' ? (i > 0 && sameTensorLayout(v, prev) ? group : tensorGroupKey(v)) : (s.group?.(v) ?? '')
          if (i > 0 && g !== group) {
            throw new CohortError('BAD_REQUEST', `a stage part mixes batch groups (${JSON.stringify(group)}, ${JSON.stringify(g)}); send one part per group`)
          }
          group = g
          prev = v
          cost += s.kind === 'ts' && s.cost ? s.cost(v) : 1
        })
        return { group, cost: Math.max(1, cost), payload: part }
      } catch (e) {
        return { group: '', payload: undefined, error: toWireError(e, 'BAD_REQUEST') }
      }
    })
  }

  async runBatch(payloads: unknown[]): Promise<ItemResult[]> {
    const parts = payloads as StagePayload[]
    const now = Date.now()
    // Per part, its items' results; items already past their own deadline are not run.
    const results: unknown[][] = []
    const live: { out: unknown[]; index: number; item: unknown; deadline: number }[] = []
    for (const p of parts) {
      const out = new Array<unknown>(p.items.length)
      results.push(out)
      p.deadlines.forEach((d, i) => {
        if (d <= now) {
          out[i] = new ItemError(`deadline passed before stage ${this.#stage.name}; not run`, 'DEADLINE_EXCEEDED')
        } else {
          live.push({ out, index: i, item: p.items[i], deadline: d })
        }
      })
    }
    // The parts of a batch run as one stage batch; one larger than the stage's batch size is
    // split into batches of at most maxBatchSize, run one after the other, and merged back.
    const max = this.batchDefaults.maxBatchSize
    for (let at = 0; at < live.length; at += max) {
      // Items whose deadline passed while earlier batches of the split ran are not run either.
      const t = Date.now()
      const chunk = live.slice(at, at + max).filter(({ out, index, deadline }) => {
        if (deadline > t) {
          return true
        }
        out[index] = new ItemError(`deadline passed before stage ${this.#stage.name}; not run`, 'DEADLINE_EXCEEDED')
        return false
      })
      if (chunk.length === 0) {
        continue
      }
      const rs = await this.#inner.run(
        chunk.map(({ item }) => item),
        {
          pipeline: this.#pipeline,
          stage: this.#stage.name,
          batchSize: chunk.length,
          deadlines: chunk.map(({ deadline }) => deadline),
          signal: this.#abort.signal,
        },
      )
      if (!Array.isArray(rs) || rs.length !== chunk.length) {
        throw new CohortError('PREDICTOR_FAILED', `stage ${this.#stage.name} returned ${Array.isArray(rs) ? rs.length : typeof rs} results for ${chunk.length} items`)
      }
      chunk.forEach(({ out, index }, k) => {
        out[index] = rs[k]
      })
    }
    return parts.map((p, k): ItemResult => {
      const rs = elementAt(results, k)
      if (!p.legacy) {
        return { json: encodeStageResults(rs) }
      }
      const r = rs[0]
      return r instanceof Error ? { error: { code: r instanceof ItemError ? r.code : 'PREDICTOR_FAILED', message: r.message } } : { json: toWireValue(r) }
    })
  }

  async close(): Promise<void> {
    this.#abort.abort()
    await this.#inner.close?.()
  }
}
