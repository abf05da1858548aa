import type { Registry } from '@cohort/metrics'
import type { InferRequest, ModelMeta, Subjects, WireError, WireTensor } from '@cohort/protocol'

/** One item of a request, ready for the batch engine (or already failed). */
export interface PreparedItem {
  /** Items of different groups never share a batch (e.g. different non-batch shapes). */
  group: string
  /** Cost units of the item (tokens, pixels) for the batch cost budget. @default 1 */
  cost?: number
  /** Runner-specific data for `runBatch`. */
  payload: unknown
  /** Set when the item failed validation: it is answered without running. */
  error?: WireError
}

/** The result of one item: output tensors (one row each), a JSON output, or an error. */
export type ItemResult = { tensors: Record<string, WireTensor> } | { json: unknown } | { error: WireError }

/** Runs one model's batches. Implemented for ONNX files and TypeScript predictors. */
export interface ModelRunner {
  readonly name: string
  /** Concurrent batches the runner can take (ORT instances). */
  readonly concurrency: number
  /** The model's own batching defaults. */
  readonly batchDefaults: { maxBatchSize: number; maxDelayMs: number }
  /** Load and warm up. */
  start(): Promise<void>
  /** Register the runner's own metrics (ONNX Runtime instances) in the worker's registry; called once, before `start`. */
  instrument?(registry: Registry): void
  meta(): ModelMeta
  /** Validate a request and split it into items. Throws CohortError for request-level faults. */
  prepare(req: InferRequest): PreparedItem[]
  /** Run one batch: one result per payload, in order. A throw fails every item of the batch. */
  runBatch(payloads: unknown[], signal: AbortSignal): Promise<ItemResult[]>
  close(): Promise<void>
  /**
   * The subjects the runner is served on, from the worker's (a pipeline stage answers on
   * `cohort.stage.<pipeline>.<stage>`). @default the model's subjects
   */
  subjects?(base: Subjects): Subjects
  /** Announce the runner in the model directory (false for pipeline stages). @default true */
  readonly announce?: boolean
}
