import { toWireError, type InferRequest, type ModelMeta } from '@cohort/protocol'
import { PipelineExecutor, type PipelineExecutorOptions } from '@cohort/pipeline'
import { ItemError, schemaToTensorMeta, validateItem } from '@cohort/predictor'
import { requestItems } from '../runners/predictor-runner.ts'
import type { ItemResult, ModelRunner, PreparedItem } from '../runners/types.ts'

/** Items the pipeline model's own (outer) engine hands to the executor at once. */
const OUTER_BATCH = 1024
/**
 * Outer batches in flight: the stages batch; the outer engine only admits. Each outer batch holds
 * one request's items (grouped by request id), so a request never waits for another to finish.
 */
const OUTER_CONCURRENCY = 256

interface PipelinePayload {
  input: unknown
  deadline: number
}

/** Plain JSON copy of a TypeBox schema (drops its symbol keys). */
function plainSchema(s: unknown): unknown {
  return s === undefined ? undefined : JSON.parse(JSON.stringify(s))
}

/**
 * Serves a pipeline as a model: validates each request item against the pipeline's input schema
 * (defaults applied; a bad item fails alone), then runs it through a {@link PipelineExecutor}
 * whose stages batch on their own, fused in this process or chained to remote stage workers.
 */
export class PipelineRunner implements ModelRunner {
  readonly name: string
  readonly concurrency = OUTER_CONCURRENCY
  readonly batchDefaults = { maxBatchSize: OUTER_BATCH, maxDelayMs: 0 }
  readonly executor: PipelineExecutor
  #ready = false
  #meta: ModelMeta | undefined

  constructor(o: PipelineExecutorOptions) {
    this.executor = new PipelineExecutor(o)
    this.name = o.pipeline.name
  }

  async start(): Promise<void> {
    await this.executor.start()
    this.#ready = true
  }

  meta(): ModelMeta {
    if (this.#meta?.ready === this.#ready) {
      return this.#meta
    }
    const p = this.executor.pipeline
    this.#meta = {
      name: this.name,
      versions: ['1'],
      platform: 'cohort_pipeline',
      inputs: schemaToTensorMeta(p.input, 'input'),
      outputs: schemaToTensorMeta(p.output, 'output'),
      kind: 'predictor',
      ready: this.#ready,
      maxBatchSize: this.batchDefaults.maxBatchSize,
      maxDelayMs: this.batchDefaults.maxDelayMs,
      inputSchema: plainSchema(p.input),
      ...(p.output ? { outputSchema: plainSchema(p.output) } : {}),
    }
    return this.#meta
  }

  prepare(req: InferRequest): PreparedItem[] {
    const raw = requestItems(req)
    const input = this.executor.pipeline.input
    return raw.map((item, i) => {
      try {
        return { group: req.id, payload: { input: validateItem(input, item, i), deadline: req.deadline } satisfies PipelinePayload }
      } catch (e) {
        return { group: '', payload: undefined, error: toWireError(e, 'INVALID_INPUT') }
      }
    })
  }

  async runBatch(payloads: unknown[]): Promise<ItemResult[]> {
    // Items of one request share a deadline: they go through the stages together.
    const byDeadline = new Map<number, number[]>()
    ;(payloads as PipelinePayload[]).forEach((p, i) => {
      const list = byDeadline.get(p.deadline)
      if (list) {
        list.push(i)
      } else {
        byDeadline.set(p.deadline, [i])
      }
    })
    const out: unknown[] = new Array(payloads.length)
    await Promise.all(
      [...byDeadline].map(async ([deadline, idx]) => {
        const rs = await this.executor.runMany(
          idx.map((i) => (payloads[i] as PipelinePayload).input),
          deadline,
        )
        idx.forEach((i, k) => (out[i] = rs[k]))
      }),
    )
    return out.map((v): ItemResult => {
      if (v instanceof ItemError) {
        return { error: { code: v.code, message: v.message } }
      }
      if (v instanceof Error) {
        return { error: { code: 'PREDICTOR_FAILED', message: v.message } }
      }
      return { json: v }
    })
  }

  close(): Promise<void> {
    return this.executor.close()
  }
}
