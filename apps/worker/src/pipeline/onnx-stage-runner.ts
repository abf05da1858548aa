import { CohortError, fromValues, toValues, type WireTensor } from '@cohort/protocol'
import { isItemTensor, type ItemTensor, type StageRunner } from '@cohort/pipeline'
import { ItemError } from '@cohort/predictor'
import { OnnxRunner, type OnnxRunnerOptions } from '../runners/onnx-runner.ts'
import { elementAt } from '../element-at.ts'

/** An item's tensors as one-row wire tensors (batch dim 1). */
export function itemToWire(item: unknown, stage: string): Record<string, WireTensor> {
  if (typeof item !== 'object' || item === null) {
    throw new CohortError('INVALID_INPUT', `stage ${stage}: an ONNX stage item must be a record of tensors`)
  }
  const out: Record<string, WireTensor> = {}
  for (const [name, t] of Object.entries(item)) {
    if (!isItemTensor(t)) {
      throw new CohortError('INVALID_INPUT', `stage ${stage}: input "${name}" is not a tensor {datatype, shape, data}`)
    }
    const w = fromValues(t.datatype, t.shape, t.data as Parameters<typeof fromValues>[2])
    out[name] = { datatype: w.datatype, shape: [1, ...w.shape], bytes: w.bytes }
  }
  return out
}

/** One-row wire tensors back to item tensors (batch dim dropped). */
export function wireToItem(tensors: Record<string, WireTensor>): Record<string, ItemTensor> {
  const out: Record<string, ItemTensor> = {}
  for (const [name, t] of Object.entries(tensors)) {
    const shape = t.shape.slice(1)
    out[name] = { datatype: t.datatype, shape, data: toValues({ ...t, shape }) }
  }
  return out
}

/**
 * Runs an ONNX stage through the worker's {@link OnnxRunner} (ORT sessions in worker threads or
 * child processes), so the event loop stays free while a batch computes.
 */
export class OnnxStageRunner implements StageRunner {
  readonly runner: OnnxRunner
  readonly #stage: string

  constructor(stage: string, opts: OnnxRunnerOptions) {
    this.#stage = stage
    this.runner = new OnnxRunner(opts)
  }

  get concurrency(): number {
    return this.runner.concurrency
  }

  start(): Promise<void> {
    return this.runner.start()
  }

  /** Per item, its result or an Error (an ItemError fails that item alone). */
  async run(items: unknown[]): Promise<unknown[]> {
    const out: unknown[] = new Array(items.length)
    const payloads: unknown[] = []
    const at: number[] = []
    items.forEach((item, i) => {
      try {
        const p = this.runner.prepare({ v: 1, id: '', model: this.runner.name, deadline: Infinity, tensors: itemToWire(item, this.#stage) })
        const first = p[0]
        if (!first || first.error) {
          throw new CohortError('INVALID_INPUT', first?.error?.message ?? 'empty item')
        }
        payloads.push(first.payload)
        at.push(i)
      } catch (e) {
        const code = e instanceof CohortError ? e.code : 'INVALID_INPUT'
        out[i] = new ItemError(`stage ${this.#stage}: ${e instanceof Error ? e.message : String(e)}`, code)
      }
    })
    if (payloads.length > 0) {
      const rs = await this.runner.runBatch(payloads)
      rs.forEach((r, k) => {
        const i = elementAt(at, k)
        out[i] = 'tensors' in r ? wireToItem(r.tensors) : 'error' in r ? new ItemError(r.error.message, r.error.code as ItemError['code']) : r.json
      })
    }
    return out
  }

  close(): Promise<void> {
    return this.runner.close()
  }
}
