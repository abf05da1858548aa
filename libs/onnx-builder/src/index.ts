/**
 * Build ONNX model files deterministically from TypeScript: a minimal protobuf writer, a small
 * onnx.proto builder, a seeded PRNG and the models Cohort ships and tests with.
 * Runtime-agnostic: everything returns `Uint8Array`s.
 * @module
 */
export { encodeVarint, ProtoWriter, WireType } from './protobuf.ts'
export {
  attr,
  ATTRIBUTE_TYPE,
  type AttributeInput,
  type AttributeValue,
  type Datatype,
  encodeAttribute,
  encodeGraph,
  encodeNode,
  encodeTensor,
  encodeValueInfo,
  float32ToFloat16Bits,
  graph,
  type GraphSpec,
  model,
  type ModelOptions,
  node,
  type NodeSpec,
  ONNX_DTYPE,
  tensorInit,
  type TensorSpec,
  type TensorValues,
  valueInfo,
  type ValueInfoSpec,
} from './onnx.ts'
export { fillNormal, mulberry32, normalSampler } from './random.ts'
export {
  buildDemoMlp,
  buildFixedBatchModel,
  buildIdentityAllTypes,
  buildMaskedSequenceModel,
  buildMlp,
  buildMultiIoModel,
  buildVariableLengthModel,
  DEMO_MLP_SIZES,
  demoMlpReference,
  demoMlpWeights,
  type DemoMlpWeights,
  HEAVY_MLP_SIZES,
  IDENTITY_DATATYPES,
} from './models.ts'
export { buildDecoder, DECODER_METADATA, type DecoderConfig, GPT2_VOCAB_DECODER, TINY_DECODER } from './decoder.ts'
