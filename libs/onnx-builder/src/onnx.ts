/**
 * A small builder for ONNX models: describe a graph with plain objects, then serialise it with
 * {@link model}. Covers the subset of onnx.proto Cohort needs (ModelProto, GraphProto, NodeProto,
 * AttributeProto, TensorProto, ValueInfoProto). Output is deterministic: same input, same bytes.
 * @module
 */
import { ProtoWriter } from './protobuf.ts'

/** Open Inference Protocol datatype names accepted by the builder. */
export type Datatype = 'BOOL' | 'UINT8' | 'UINT16' | 'UINT32' | 'UINT64' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' | 'BYTES'

/** ONNX `TensorProto.DataType` number for each Open Inference Protocol datatype (BYTES is STRING). */
export const ONNX_DTYPE: Readonly<Record<Datatype, number>> = {
  FP32: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  BYTES: 8,
  BOOL: 9,
  FP16: 10,
  FP64: 11,
  UINT32: 12,
  UINT64: 13,
}

/** `AttributeProto.AttributeType` numbers for the kinds this builder writes. */
export const ATTRIBUTE_TYPE = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7 } as const

/** Element values for a tensor: numbers/bigints/booleans, or strings/bytes for BYTES. */
export type TensorValues = ArrayLike<number> | ArrayLike<bigint> | ArrayLike<boolean> | ArrayLike<string | Uint8Array>

/** A constant tensor (TensorProto), e.g. a graph initializer or a `t` attribute. */
export interface TensorSpec {
  readonly name: string
  readonly dtype: Datatype
  readonly dims: readonly number[]
  readonly data: TensorValues
}

/** A typed node attribute (AttributeProto). */
export type AttributeValue =
  | { readonly kind: 'float'; readonly value: number }
  | { readonly kind: 'int'; readonly value: number | bigint }
  | { readonly kind: 'string'; readonly value: string | Uint8Array }
  | { readonly kind: 'tensor'; readonly value: TensorSpec }
  | { readonly kind: 'floats'; readonly value: readonly number[] }
  | { readonly kind: 'ints'; readonly value: readonly (number | bigint)[] }

/**
 * Attribute shorthand: `number`/`bigint` is INT (a `number` must be an integer), `string` and
 * `Uint8Array` are STRING, `number[]` is INTS. Floats must be spelled with {@link attr}`.float`
 * / `attr.floats`, so `alpha: 1` cannot silently become an INT where a FLOAT was meant.
 */
export type AttributeInput = AttributeValue | number | bigint | string | Uint8Array | readonly (number | bigint)[]

/** Helpers to make typed attribute values. */
export const attr = {
  /** A FLOAT attribute. */
  float: (value: number): AttributeValue => ({ kind: 'float', value }),
  /** An INT attribute. */
  int: (value: number | bigint): AttributeValue => ({ kind: 'int', value }),
  /** A STRING attribute (UTF-8 for strings). */
  string: (value: string | Uint8Array): AttributeValue => ({ kind: 'string', value }),
  /** A TENSOR attribute. */
  tensor: (value: TensorSpec): AttributeValue => ({ kind: 'tensor', value }),
  /** A FLOATS attribute. */
  floats: (value: readonly number[]): AttributeValue => ({ kind: 'floats', value }),
  /** An INTS attribute. */
  ints: (value: readonly (number | bigint)[]): AttributeValue => ({ kind: 'ints', value }),
}

/** A graph node (NodeProto). */
export interface NodeSpec {
  readonly opType: string
  readonly inputs: readonly string[]
  readonly outputs: readonly string[]
  readonly name: string
  readonly domain?: string
  readonly attributes: readonly (readonly [string, AttributeValue])[]
}

/** A graph input or output declaration (ValueInfoProto with a tensor type). */
export interface ValueInfoSpec {
  readonly name: string
  readonly dtype: Datatype
  /** Numbers are fixed sizes (`dim_value`); strings are symbolic (`dim_param`), e.g. `'batch'`. */
  readonly dims: readonly (number | string)[]
}

/** A computation graph (GraphProto). */
export interface GraphSpec {
  readonly name: string
  readonly inputs: readonly ValueInfoSpec[]
  readonly outputs: readonly ValueInfoSpec[]
  readonly nodes: readonly NodeSpec[]
  readonly initializers: readonly TensorSpec[]
}

/** Options for {@link model}. */
export interface ModelOptions {
  /** Default 8. */
  readonly irVersion?: number
  /** Default-domain opset version; default 17. */
  readonly opset?: number
  /** Default `'cohort'`. */
  readonly producerName?: string
  /** Further operator sets, e.g. `{ domain: 'com.microsoft', version: 1 }` for ORT contrib ops. Default none. */
  readonly extraOpsets?: readonly { readonly domain: string; readonly version: number }[]
  /** `ModelProto.metadata_props` (key -> value), written in key order. Default none. */
  readonly metadata?: Readonly<Record<string, string>>
}

function normaliseAttribute(name: string, v: AttributeInput): AttributeValue {
  if (typeof v === 'bigint') return attr.int(v)
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw new TypeError(`attribute ${name}: ${v} is not an integer; use attr.float()`)
    return attr.int(v)
  }
  if (typeof v === 'string' || v instanceof Uint8Array) return attr.string(v)
  if (Array.isArray(v)) {
    for (const x of v as readonly (number | bigint)[]) {
      if (typeof x === 'number' && !Number.isInteger(x)) {
        throw new TypeError(`attribute ${name}: ${x} is not an integer; use attr.floats()`)
      }
    }
    return attr.ints(v as readonly (number | bigint)[])
  }
  return v as AttributeValue
}

/**
 * Makes a node. Attributes are written in key order, so output does not depend on object order.
 * @param op ONNX operator type, e.g. `'MatMul'`
 * @param opts.name node name; defaults to `<op>_<first output>`
 * @param opts.domain operator domain; defaults to the ONNX default domain
 */
export function node(
  op: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attrs: Readonly<Record<string, AttributeInput>> = {},
  opts: { readonly name?: string; readonly domain?: string } = {},
): NodeSpec {
  const attributes = Object.keys(attrs)
    .sort()
    .map((k) => [k, normaliseAttribute(k, attrs[k] as AttributeInput)] as const)
  return {
    opType: op,
    inputs: [...inputs],
    outputs: [...outputs],
    name: opts.name ?? `${op}_${outputs[0] ?? ''}`,
    ...(opts.domain !== undefined ? { domain: opts.domain } : {}),
    attributes,
  }
}

/**
 * Makes a constant tensor (for initializers or TENSOR attributes). `data` length must equal the
 * product of `dims` (`[]` is a scalar). INT64/UINT64 take numbers or bigints; FP16 takes a
 * `Uint16Array` of raw half bits, or plain numbers which are rounded to half; BOOL takes booleans
 * or 0/1; BYTES takes strings (UTF-8) or `Uint8Array`s.
 */
export function tensorInit(name: string, dtype: Datatype, dims: readonly number[], data: TensorValues): TensorSpec {
  const n = dims.reduce((a, b) => a * b, 1)
  for (const d of dims) if (!Number.isInteger(d) || d < 0) throw new RangeError(`tensor ${name}: bad dim ${d}`)
  if (data.length !== n) throw new RangeError(`tensor ${name}: ${data.length} values for dims [${dims.join(', ')}]`)
  if (!(dtype in ONNX_DTYPE)) throw new TypeError(`tensor ${name}: unknown datatype ${dtype}`)
  return { name, dtype, dims: [...dims], data }
}

/** Declares a graph input/output; string dims are symbolic (e.g. `['batch', 256]`). */
export function valueInfo(name: string, dtype: Datatype, dims: readonly (number | string)[]): ValueInfoSpec {
  if (!(dtype in ONNX_DTYPE)) throw new TypeError(`value ${name}: unknown datatype ${dtype}`)
  return { name, dtype, dims: [...dims] }
}

/** Assembles a graph; `initializers` defaults to none. */
export function graph(spec: {
  readonly name: string
  readonly inputs: readonly ValueInfoSpec[]
  readonly outputs: readonly ValueInfoSpec[]
  readonly nodes: readonly NodeSpec[]
  readonly initializers?: readonly TensorSpec[]
}): GraphSpec {
  return {
    name: spec.name,
    inputs: [...spec.inputs],
    outputs: [...spec.outputs],
    nodes: [...spec.nodes],
    initializers: [...(spec.initializers ?? [])],
  }
}

/**
 * Serialises a graph to an ONNX ModelProto (ir_version 8, default-domain opset 17 and
 * producer `'cohort'` unless overridden). Deterministic: the same graph gives the same bytes.
 */
export function model(g: GraphSpec, opts: ModelOptions = {}): Uint8Array {
  const opset = new ProtoWriter()
    .string(1, '') // OperatorSetIdProto.domain: default ONNX domain
    .varint(2, opts.opset ?? 17) // OperatorSetIdProto.version
    .finish()
  const w = new ProtoWriter()
    .varint(1, opts.irVersion ?? 8) // ModelProto.ir_version
    .string(2, opts.producerName ?? 'cohort') // ModelProto.producer_name
    .message(7, encodeGraph(g)) // ModelProto.graph
    .message(8, opset) // ModelProto.opset_import
  for (const o of opts.extraOpsets ?? []) {
    w.message(8, new ProtoWriter().string(1, o.domain).varint(2, o.version).finish())
  }
  const meta = opts.metadata ?? {}
  for (const k of Object.keys(meta).sort()) {
    w.message(
      14,
      new ProtoWriter()
        .string(1, k)
        .string(2, meta[k] as string)
        .finish(),
    ) // metadata_props
  }
  return w.finish()
}

/** Encodes a GraphProto. */
export function encodeGraph(g: GraphSpec): Uint8Array {
  const w = new ProtoWriter()
  for (const n of g.nodes) w.message(1, encodeNode(n)) // node
  w.string(2, g.name) // name
  for (const t of g.initializers) w.message(5, encodeTensor(t)) // initializer
  for (const v of g.inputs) w.message(11, encodeValueInfo(v)) // input
  for (const v of g.outputs) w.message(12, encodeValueInfo(v)) // output
  return w.finish()
}

/** Encodes a NodeProto. */
export function encodeNode(n: NodeSpec): Uint8Array {
  const w = new ProtoWriter()
  for (const i of n.inputs) w.string(1, i) // input
  for (const o of n.outputs) w.string(2, o) // output
  w.string(3, n.name) // name
  w.string(4, n.opType) // op_type
  for (const [name, value] of n.attributes) w.message(5, encodeAttribute(name, value)) // attribute
  if (n.domain !== undefined) w.string(7, n.domain) // domain
  return w.finish()
}

/** Encodes an AttributeProto. */
export function encodeAttribute(name: string, a: AttributeValue): Uint8Array {
  const w = new ProtoWriter().string(1, name) // name
  let type: number
  switch (a.kind) {
    case 'float':
      w.float(2, a.value) // f
      type = ATTRIBUTE_TYPE.FLOAT
      break
    case 'int':
      w.varint(3, a.value) // i
      type = ATTRIBUTE_TYPE.INT
      break
    case 'string':
      w.bytes(4, typeof a.value === 'string' ? new TextEncoder().encode(a.value) : a.value) // s
      type = ATTRIBUTE_TYPE.STRING
      break
    case 'tensor':
      w.message(5, encodeTensor(a.value)) // t
      type = ATTRIBUTE_TYPE.TENSOR
      break
    case 'floats':
      w.packedFloat(7, a.value) // floats
      type = ATTRIBUTE_TYPE.FLOATS
      break
    case 'ints':
      w.packedVarint(8, a.value) // ints
      type = ATTRIBUTE_TYPE.INTS
      break
  }
  w.varint(20, type) // type
  return w.finish()
}

/** Encodes a ValueInfoProto holding a TypeProto.Tensor with a TensorShapeProto. */
export function encodeValueInfo(v: ValueInfoSpec): Uint8Array {
  const shape = new ProtoWriter()
  for (const d of v.dims) {
    const dim = new ProtoWriter()
    if (typeof d === 'string')
      dim.string(2, d) // Dimension.dim_param
    else dim.varint(1, d) // Dimension.dim_value
    shape.message(1, dim.finish()) // TensorShapeProto.dim
  }
  const tensorType = new ProtoWriter()
    .varint(1, ONNX_DTYPE[v.dtype]) // TypeProto.Tensor.elem_type
    .message(2, shape.finish()) // TypeProto.Tensor.shape
    .finish()
  const type = new ProtoWriter().message(1, tensorType).finish() // TypeProto.tensor_type
  return new ProtoWriter()
    .string(1, v.name) // ValueInfoProto.name
    .message(2, type) // ValueInfoProto.type
    .finish()
}

/** Encodes a TensorProto: numeric data as little-endian `raw_data`, BYTES as `string_data`. */
export function encodeTensor(t: TensorSpec): Uint8Array {
  const w = new ProtoWriter()
  w.packedVarint(1, t.dims) // dims
  w.varint(2, ONNX_DTYPE[t.dtype]) // data_type
  if (t.dtype === 'BYTES') {
    const enc = new TextEncoder()
    for (let i = 0; i < t.data.length; i++) {
      const s = t.data[i]
      if (typeof s === 'string')
        w.bytes(6, enc.encode(s)) // string_data
      else if (s instanceof Uint8Array) w.bytes(6, s)
      else throw new TypeError(`tensor ${t.name}: BYTES elements must be strings or Uint8Array`)
    }
    w.string(8, t.name) // name
  } else {
    w.string(8, t.name) // name
    w.bytes(9, rawData(t)) // raw_data
  }
  return w.finish()
}

function num(name: string, v: unknown): number {
  if (typeof v === 'number') return v
  if (typeof v === 'boolean') return v ? 1 : 0
  if (typeof v === 'bigint') return Number(v)
  throw new TypeError(`tensor ${name}: non-numeric element ${String(v)}`)
}

function big(name: string, v: unknown): bigint {
  if (typeof v === 'bigint') return v
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v)
  throw new TypeError(`tensor ${name}: ${String(v)} is not an integer`)
}

/** Little-endian raw bytes of a numeric tensor. */
function rawData(t: TensorSpec): Uint8Array {
  const n = t.data.length
  const d = t.data as ArrayLike<unknown>
  const size: Record<Exclude<Datatype, 'BYTES'>, number> = {
    BOOL: 1,
    UINT8: 1,
    INT8: 1,
    UINT16: 2,
    INT16: 2,
    FP16: 2,
    UINT32: 4,
    INT32: 4,
    FP32: 4,
    UINT64: 8,
    INT64: 8,
    FP64: 8,
  }
  const dtype = t.dtype as Exclude<Datatype, 'BYTES'>
  const out = new Uint8Array(n * size[dtype])
  const dv = new DataView(out.buffer)
  for (let i = 0; i < n; i++) {
    const v = d[i]
    switch (dtype) {
      case 'BOOL':
        out[i] = num(t.name, v) ? 1 : 0
        break
      case 'UINT8':
        dv.setUint8(i, num(t.name, v))
        break
      case 'INT8':
        dv.setInt8(i, num(t.name, v))
        break
      case 'UINT16':
        dv.setUint16(i * 2, num(t.name, v), true)
        break
      case 'INT16':
        dv.setInt16(i * 2, num(t.name, v), true)
        break
      case 'FP16':
        dv.setUint16(i * 2, t.data instanceof Uint16Array ? (v as number) : float32ToFloat16Bits(num(t.name, v)), true)
        break
      case 'UINT32':
        dv.setUint32(i * 4, num(t.name, v), true)
        break
      case 'INT32':
        dv.setInt32(i * 4, num(t.name, v), true)
        break
      case 'FP32':
        dv.setFloat32(i * 4, num(t.name, v), true)
        break
      case 'UINT64':
        dv.setBigUint64(i * 8, big(t.name, v), true)
        break
      case 'INT64':
        dv.setBigInt64(i * 8, big(t.name, v), true)
        break
      case 'FP64':
        dv.setFloat64(i * 8, num(t.name, v), true)
        break
    }
  }
  return out
}

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

/** Rounds a number to IEEE 754 half precision (round-to-nearest-even) and returns its 16 bits. */
export function float32ToFloat16Bits(value: number): number {
  f32[0] = value
  const x = u32[0] as number
  const sign = (x >>> 16) & 0x8000
  const exp = (x >>> 23) & 0xff
  let mant = x & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0) // Inf / NaN
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00 // overflow to Inf
  if (e <= 0) {
    if (e < -10) return sign // underflow to signed zero
    mant |= 0x800000
    const shift = 14 - e
    let half = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const halfway = 1 << (shift - 1)
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half++
    return sign | half
  }
  let half = (e << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++ // a carry into the exponent is correct
  return sign | half
}
