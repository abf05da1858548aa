/**
 * Continuous (iteration-level) batching of ONNX decoders with a KV cache (docs/generative.md):
 * the scheduler ({@link Engine}), the KV slab, sampling and incremental stop-string text.
 * Runtime-agnostic: the app passes a {@link DecoderSession} (onnxruntime) and a {@link Tokenizer}.
 * @module
 */
export { DEFAULT_TTFT_SLO_MS, Engine, type EngineOptions } from './engine.ts'
export { KvSlab, SLAB_BUCKET } from './kv-slab.ts'
export { emptyMetrics, type EngineMetrics, type EngineObserver, type FinishedInfo, type StepInfo } from './metrics.ts'
export { seededPrng, type Prng } from './prng.ts'
export { sampleToken, topIndices, type Sampled, type SamplerSettings } from './sampling.ts'
export { checkRequest, DEFAULT_TEMPERATURE, MAX_LOGPROBS } from './sequence.ts'
export { OPTIMUM_NAMES, type DecoderNames, type DecoderSession, type DecoderSpec, type TensorLike } from './session.ts'
export { OutputText, tokenPiece, type Tokenizer } from './text.ts'
export { byteTokenizer, BYTE_EOS } from './byte-tokenizer.ts'
