/**
 * The session-like interface the engine drives (the app passes onnxruntime behind it), and the
 * decoder's shape and I/O names.
 * @module
 */

/** A tensor as the engine hands it to the session (row-major). */
export interface TensorLike {
  readonly type: 'int64' | 'float32'
  readonly data: BigInt64Array | Float32Array
  readonly dims: readonly number[]
}

/**
 * One model session. `fetches` pre-allocates outputs: a fetch that is the *same object* as a feed
 * must be bound to the same memory as that feed (the shared past/present KV buffer, updated in
 * place); `null` lets the session allocate. Only `logits` is read from the result. The feeds'
 * buffers are the engine's, reused by its next step: read them during `run` only. The KV tensors
 * are the same objects from step to step until the slab is resized (a session may cache what it
 * builds from them, as `ortDecoderSession` does).
 */
export interface DecoderSession {
  run(feeds: Record<string, TensorLike>, fetches: Record<string, TensorLike | null>): Promise<Record<string, TensorLike>>
}

/** The decoder's shape and names (docs/generative.md#models). */
export interface DecoderSpec {
  layers: number
  kvHeads: number
  headDim: number
  vocabSize: number
  /** Longest prompt + output in tokens (position embeddings, slab rows). */
  maxContext: number
  /** End-of-sequence token. */
  eosId: number
  /**
   * KV layout. Only `'gqa-shared'` (com.microsoft.GroupQueryAttention: a past buffer longer than
   * the sequence, per-row lengths from `attention_mask`, past and present the same buffer) is
   * served; plain concat exports are detected and refused with a clear error by the app.
   */
  layout: 'gqa-shared'
  /** Input and output names; default the Optimum convention. */
  names?: Partial<DecoderNames>
}

/** I/O names of a decoder; `{i}` is the layer. */
export interface DecoderNames {
  inputIds: string
  attentionMask: string
  /** `''` when the model has no position_ids input. */
  positionIds: string
  pastKey: string
  pastValue: string
  presentKey: string
  presentValue: string
  logits: string
}

/** The Optimum names. */
export const OPTIMUM_NAMES: DecoderNames = {
  inputIds: 'input_ids',
  attentionMask: 'attention_mask',
  positionIds: 'position_ids',
  pastKey: 'past_key_values.{i}.key',
  pastValue: 'past_key_values.{i}.value',
  presentKey: 'present.{i}.key',
  presentValue: 'present.{i}.value',
  logits: 'logits',
}
