/**
 * Generative models in the worker (docs/generative.md): the ORT-backed {@link Generator} and its
 * tokenizers. The model server wires `createOnnxGenerator` to a generative model kind.
 * @module
 */
export { createOnnxGenerator, type OnnxGenerator, type OnnxGeneratorOptions } from './onnx-generator.ts'
export { GPT2_EOS, gpt2Tokenizer, tokenizerByName, type TokenizerName } from './tokenizers.ts'
export { ortDecoderSession } from './ort-session.ts'
export { onnxMetadata, usesGroupQueryAttention } from './model-file.ts'
