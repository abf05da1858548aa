import {
  CohortError,
  isErrorCode,
  toWireError,
  type InferRequest,
  type ModelMeta,
} from '@cohort/protocol'
import { schemaToTensorMeta, tensorsToItems, validateItem, type Predictor } from '@cohort/predictor'
import type { ItemResult, ModelRunner, PreparedItem } from './types.ts'

/** Plain JSON copy of a TypeBox schema (drops its symbol keys). */
function plainSchema(s: unknown): unknown {
  return s === undefined ? undefined : JSON.parse(JSON.stringify(s))
}

/** Runs a TypeScript predictor made with `definePredictor`. */
export class PredictorRunner implements ModelRunner {
  readonly name: string
  readonly concurrency = 1
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number }
  readonly #p: Predictor
  readonly #abort = new AbortController()
  #ready = false
  #meta: ModelMeta | undefined

  constructor(p: Predictor, overrides: { maxBatchSize?: number; maxDelayMs?: number } = {}) {
    this.#p = p
    this.name = p.name
    this.batchDefaults = {
      maxBatchSize: overrides.maxBatchSize ?? p.batch.maxBatchSize,
      maxDelayMs: overrides.maxDelayMs ?? p.batch.maxDelayMs,
    }
  }

  async start(): Promise<void> {
    await this.#p.setup({ name: this.name, signal: this.#abort.signal })
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

  async runBatch(payloads: unknown[]): Promise<ItemResult[]> {
    const out = await this.#p.predictBatch(payloads, { batchSize: payloads.length, signal: this.#abort.signal })
    return out.map((v): ItemResult => {
      if (v instanceof Error) {
        const code = (v as Error & { code?: unknown }).code
        return { error: { code: isErrorCode(code) ? code : 'PREDICTOR_FAILED', message: v.message } }
      }
      return { json: v }
    })
  }

  async close(): Promise<void> {
    this.#abort.abort()
    await this.#p.teardown()
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
