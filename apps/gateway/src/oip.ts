import { CohortError, checkTensorBytes, isDatatype, jsonToTensor, tensorToJson, toValues, type Datatype, type WireTensor } from '@cohort/protocol'
import { DECIMAL_LENGTH, UTF8, rejectNonFinite } from './body.ts'
import { exactData, parseJsonExact } from './json-exact.ts'

/** A parsed Open Inference Protocol inference request. */
export interface OipRequest {
  id: string | undefined
  parameters: Record<string, unknown>
  tensors: Record<string, WireTensor>
  /** Requested outputs in order; `binary` is the output's `parameters.binary_data` when given. */
  outputs: { name: string; binary: boolean | undefined }[] | undefined
  /** `binary_data_output` on the request. */
  binaryOutput: boolean
  itemCount: number
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * Parse and check an OIP request body: JSON, or JSON followed by binary tensors
 * (`Inference-Header-Content-Length`, Triton's binary tensor data extension).
 */
export function parseInferBody(body: Uint8Array, headerLength: string | undefined): OipRequest {
  const n = headerLength === undefined ? undefined : jsonHeaderLength(body, headerLength)
  const jsonPart = n === undefined ? body : body.subarray(0, n)
  const binary = n === undefined ? undefined : body.subarray(n)
  const { value: doc, hasBig } = parseDocument(jsonPart)
  if (!isObject(doc)) {
    throw new CohortError('BAD_REQUEST', 'body must be a JSON object with "inputs"')
  }
  const id = doc['id']
  if (id !== undefined && typeof id !== 'string') {
    throw new CohortError('BAD_REQUEST', '"id" must be a string')
  }
  const parameters = doc['parameters'] ?? {}
  if (!isObject(parameters)) {
    throw new CohortError('BAD_REQUEST', '"parameters" must be an object')
  }
  const inputs = doc['inputs']
  if (!Array.isArray(inputs) || inputs.length === 0) {
    throw new CohortError('BAD_REQUEST', '"inputs" must be a non-empty array')
  }
  const tensors: Record<string, WireTensor> = {}
  const itemCount = inputTensors(inputs, binary, hasBig, tensors)
  if (itemCount === 0) {
    throw new CohortError('BAD_REQUEST', 'the request has no items (dim 0 of the inputs is 0)')
  }
  return {
    id,
    parameters,
    tensors,
    outputs: requestedOutputs(doc['outputs']),
    binaryOutput: parameters['binary_data_output'] === true,
    itemCount: itemCount ?? 0,
  }
}

/** The length of the JSON part, from `Inference-Header-Content-Length` (BAD_REQUEST unless a decimal within the body). */
function jsonHeaderLength(body: Uint8Array, headerLength: string): number {
  const n = DECIMAL_LENGTH.test(headerLength) ? Number(headerLength) : Number.NaN
  if (!(n <= body.byteLength)) {
    throw new CohortError(
      'BAD_REQUEST',
      `Inference-Header-Content-Length ${JSON.stringify(headerLength.slice(0, 40))} is not within the body (${body.byteLength} bytes; a decimal integer of bytes)`,
    )
  }
  return n
}

/**
 * The JSON document (integers beyond 2^53 kept exact in INT64/UINT64 tensors; non-finite numbers
 * refused). Exactness matters only for those datatypes ({@link exactData} gives every other one
 * the number `JSON.parse` gives), so only a body that names one takes the exact parse: a float
 * body's 17-digit fractions no longer send every request through a scan of its text.
 */
function parseDocument(jsonPart: Uint8Array): { value: unknown; hasBig: boolean } {
  const text = UTF8.decode(jsonPart)
  let parsed: { value: unknown; hasBig: boolean }
  try {
    parsed = text.includes('INT64') ? parseJsonExact(text) : { value: JSON.parse(text), hasBig: false }
  } catch (e) {
    throw new CohortError('BAD_REQUEST', `body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  // An exact parse keeps long integers as text, which the walk does not see: scan the text then.
  rejectNonFinite(text, parsed.hasBig ? undefined : parsed)
  return parsed
}

/** A non-empty array of non-negative integers (dim 0 = items). */
function isShape(v: unknown): v is [number, ...number[]] {
  return Array.isArray(v) && v.length > 0 && v.every((d) => Number.isSafeInteger(d) && d >= 0)
}

/** Check each input and add its tensor to `tensors`; the inputs' common dim 0 (undefined for none). */
function inputTensors(inputs: unknown[], binary: Uint8Array | undefined, hasBig: boolean, tensors: Record<string, WireTensor>): number | undefined {
  let offset = 0
  let itemCount: number | undefined
  for (const [i, inp] of inputs.entries()) {
    if (!isObject(inp) || typeof inp['name'] !== 'string') {
      throw new CohortError('BAD_REQUEST', `inputs[${i}] must be an object with a string "name"`)
    }
    const name = inp['name']
    const datatype = inp['datatype']
    if (!isDatatype(datatype)) {
      throw new CohortError('BAD_REQUEST', `input "${name}": unknown datatype ${JSON.stringify(datatype)}`)
    }
    const shape = inp['shape']
    if (!isShape(shape)) {
      throw new CohortError('BAD_REQUEST', `input "${name}": "shape" must be a non-empty array of non-negative integers (dim 0 = items)`)
    }
    if (Object.hasOwn(tensors, name)) {
      throw new CohortError('BAD_REQUEST', `input "${name}" appears twice`)
    }
    const params = isObject(inp['parameters']) ? inp['parameters'] : {}
    const binSize = params['binary_data_size']
    if (binSize !== undefined) {
      tensors[name] = binaryTensor(name, datatype, shape, binary, offset, binSize)
      offset += binSize as number
    } else {
      if (!('data' in inp)) {
        throw new CohortError('BAD_REQUEST', `input "${name}" has no "data"`)
      }
      const data = hasBig ? exactData(inp['data'], datatype) : inp['data']
      tensors[name] = jsonToTensor(name, datatype, shape, data)
    }
    const n = shape[0]
    if (itemCount !== undefined && n !== itemCount) {
      throw new CohortError('BAD_REQUEST', `inputs disagree on dim 0 (items): ${itemCount} vs ${n} for "${name}"`)
    }
    itemCount = n
  }
  return itemCount
}

/** An entry of `outputs` as the request must give it. */
function isOutputSpec(o: unknown): o is { name: string; parameters?: unknown } {
  return isObject(o) && typeof o['name'] === 'string'
}

/** The requested outputs in order (`binary`: the output's `parameters.binary_data`); undefined when the request names none. */
function requestedOutputs(outputsRaw: unknown): OipRequest['outputs'] {
  if (outputsRaw === undefined) {
    return undefined
  }
  if (!Array.isArray(outputsRaw) || !outputsRaw.every(isOutputSpec)) {
    throw new CohortError('BAD_REQUEST', '"outputs" must be an array of {"name": string}')
  }
  return outputsRaw.map((o) => {
    const p = isObject(o.parameters) ? o.parameters : {}
    const b = p['binary_data']
    if (b !== undefined && typeof b !== 'boolean') {
      throw new CohortError('BAD_REQUEST', `output "${o.name}": parameters.binary_data must be a boolean`)
    }
    return { name: o.name, binary: b }
  })
}

function binaryTensor(name: string, datatype: Datatype, shape: number[], binary: Uint8Array | undefined, offset: number, size: unknown): WireTensor {
  if (!binary) {
    throw new CohortError('BAD_REQUEST', `input "${name}" has binary_data_size but the request has no Inference-Header-Content-Length`)
  }
  if (!Number.isSafeInteger(size) || (size as number) < 0 || offset + (size as number) > binary.byteLength) {
    throw new CohortError('BAD_REQUEST', `input "${name}": binary_data_size ${JSON.stringify(size)} exceeds the binary section`)
  }
  const bytes = binary.subarray(offset, offset + (size as number))
  checkTensorBytes(datatype, shape, bytes, `input "${name}"`)
  return { datatype, shape, bytes }
}

/** True for an output whose JSON is exact text (INT64/UINT64: {@link outputJson} needs a `raw` map for it). */
export function hasRawJson(t: WireTensor): boolean {
  return t.datatype === 'INT64' || t.datatype === 'UINT64'
}

/**
 * One output tensor in the OIP JSON response (data as a flat row-major array). INT64/UINT64 data
 * is a marker string recorded in `raw` with the exact JSON text, for {@link stringifyWithRaw}.
 */
export function outputJson(name: string, t: WireTensor, raw?: Map<string, string>): Record<string, unknown> {
  if (raw && hasRawJson(t)) {
    const marker = `\u0000cohort-raw-${raw.size}`
    raw.set(marker, `[${Array.from(toValues(t) as BigInt64Array | BigUint64Array, String).join(',')}]`)
    return { name, datatype: t.datatype, shape: t.shape, data: marker }
  }
  return { name, datatype: t.datatype, shape: t.shape, data: tensorToJson(t) }
}
