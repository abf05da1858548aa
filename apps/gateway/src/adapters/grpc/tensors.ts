import { CohortError, checkShape, checkTensorBytes, encodeBytesElements, isDatatype, jsonToTensor, type Datatype, type WireTensor } from '@cohort/protocol'

/** `InferTensorContents` of grpc_service.proto, as @grpc/proto-loader decodes it (longs as strings). */
export interface TensorContents {
  bool_contents?: boolean[]
  int_contents?: number[]
  int64_contents?: (string | number)[]
  uint_contents?: number[]
  uint64_contents?: (string | number)[]
  fp32_contents?: number[]
  fp64_contents?: number[]
  bytes_contents?: Uint8Array[]
}

/** `ModelInferRequest.InferInputTensor`. */
export interface GrpcInputTensor {
  name: string
  datatype: string
  shape: (string | number)[]
  parameters?: Record<string, unknown>
  contents?: TensorContents | null
}

/** The typed-contents field Triton uses for each datatype (FP16 has none: raw only). */
const CONTENTS_FIELD: Partial<Record<Datatype, keyof TensorContents>> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
}

const bad = (m: string) => new CohortError('BAD_REQUEST', m)

/**
 * Convert the inputs of a `ModelInferRequest` to wire tensors: every input from
 * `raw_input_contents` (in input order, Triton's layout: little-endian, BYTES length-prefixed) when
 * that is non-empty, else from its typed `contents`. Throws BAD_REQUEST naming the input.
 */
export function grpcInputs(inputs: readonly GrpcInputTensor[], raw: readonly Uint8Array[]): { tensors: Record<string, WireTensor>; itemCount: number } {
  if (inputs.length === 0) {
    throw bad('the request has no inputs')
  }
  if (raw.length > 0 && raw.length !== inputs.length) {
    throw bad(`raw_input_contents has ${raw.length} entries for ${inputs.length} inputs: use raw contents for every input or none`)
  }
  const tensors: Record<string, WireTensor> = {}
  let itemCount: number | undefined
  inputs.forEach((inp, i) => {
    const name = inp.name
    if (typeof name !== 'string' || name === '') {
      throw bad(`inputs[${i}] has no name`)
    }
    if (Object.hasOwn(tensors, name)) {
      throw bad(`input "${name}" appears twice`)
    }
    const datatype = inp.datatype
    if (!isDatatype(datatype)) {
      throw bad(`input "${name}": unknown datatype ${JSON.stringify(datatype)}`)
    }
    const shape = checkShape(
      inp.shape.map((d) => Number(d)),
      `input "${name}": shape`,
    )
    const n = shape[0]
    if (n === undefined) {
      throw bad(`input "${name}": shape must have a batch dimension (dim 0 = items)`)
    }
    let t: WireTensor
    if (raw.length > 0) {
      const bytes = raw[i]
      if (bytes === undefined) {
        throw bad(`input "${name}" has no raw_input_contents entry`)
      }
      checkTensorBytes(datatype, shape, bytes, `input "${name}"`)
      t = { datatype, shape, bytes }
    } else {
      const field = CONTENTS_FIELD[datatype]
      const values = field ? inp.contents?.[field] : undefined
      if (!field || !values) {
        throw bad(`input "${name}" (${datatype}) has no ${field ?? 'raw_input_contents'}`)
      }
      if (datatype === 'BYTES') {
        const bytes = encodeBytesElements(values as Uint8Array[])
        checkTensorBytes(datatype, shape, bytes, `input "${name}"`)
        t = { datatype, shape, bytes }
      } else {
        t = jsonToTensor(name, datatype, shape, values)
      }
    }
    tensors[name] = t
    if (itemCount !== undefined && itemCount !== n) {
      throw bad(`inputs disagree on dim 0 (items): ${itemCount} vs ${n} for "${name}"`)
    }
    itemCount = n
  })
  if (!itemCount) {
    throw bad('the request has no items (dim 0 of the inputs is 0)')
  }
  return { tensors, itemCount }
}
