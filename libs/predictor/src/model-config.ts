/**
 * The per-model configuration of a model repository folder (docs/repository.md#configjson):
 * what `DIR/<model>/config.json` holds, or the default export of `DIR/<model>/config.ts`. Every
 * field is optional; the worker validates it the same way whichever file it came from.
 */
export interface ModelConfig {
  /** Which versions serve: the newest N (`{ latest: 1 }`, the default), `'all'`, or the ones listed. */
  versionPolicy?: { latest: number } | 'all' | { specific: (string | number)[] }
  /** The `file` layer of the batching fields (same names and bounds as `PUT /admin/models/{m}/batching`). */
  batching?: ModelConfigBatching
  /** ONNX sessions, 1 to 64 (ONNX models and a pipeline's ONNX stages). */
  instances?: number
  /** Intra-op threads per ONNX session (ONNX models and a pipeline's ONNX stages). */
  threads?: number
  /** Execution provider (ONNX models and a pipeline's ONNX stages). */
  ep?: 'cpu' | 'webgpu' | 'cuda'
  /** ONNX sessions in child processes (ONNX models only). */
  processes?: boolean
  /** Padding of ragged inputs (ONNX models only). */
  padding?: { padValue?: number; maskInput?: string; buckets?: number[] }
  /** Warm-up before serving (ONNX models only). */
  warmup?: 'off' | { count: number; sizes?: number[] }
}

/** The batching fields of {@link ModelConfig} (docs/repository.md#layers). */
export interface ModelConfigBatching {
  maxBatchSize?: number
  maxDelayMs?: number
  policy?: 'eager' | 'timer' | 'deadline'
  maxQueue?: number
  maxBatchCost?: number | null
  maxTenantQueue?: number
  sloMs?: number
  admission?: boolean
  autoBatchSize?: boolean
}

/**
 * Type a repository model's `config.ts` (the object is returned as is; the worker checks it):
 * `export default defineModelConfig({ batching: { maxBatchSize: 8 } })`.
 */
export function defineModelConfig(c: ModelConfig): ModelConfig {
  return c
}
