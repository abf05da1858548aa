/**
 * Tensor data helpers: validation, typed-array views, Open Inference Protocol JSON <-> wire tensors,
 * BYTES element layout, and row slicing/concatenation along the batch dimension.
 * Multi-byte values are little-endian; typed-array views assume a little-endian host (all supported ones).
 * @module
 */
import { DATATYPE_SIZE, isDatatype, type Datatype } from './datatypes.ts'
import { CohortError } from './errors.ts'
import { f16BitsToF32, f32ToF16Bits } from './fp16.ts'
import type { WireTensor } from './tensor.ts'
import { wireCounts } from './wire-counts.ts'

/** Highest tensor rank accepted. */
export const MAX_RANK = 16

/** Most elements a tensor may have (2^31). */
export const MAX_ELEMENTS = 2 ** 31

/** Deepest nesting of JSON `data` arrays accepted by {@link jsonToTensor}. */
const MAX_JSON_DEPTH = 32

/** The natural in-memory values of a tensor (see {@link toValues}). */
export type TensorValues = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | BigUint64Array | BigInt64Array | Float32Array | Float64Array | string[]

type FixedDatatype = Exclude<Datatype, 'BYTES'>
type FixedValues = Exclude<TensorValues, string[]>
interface ValuesCtor {
  new (length: number): FixedValues
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): FixedValues
}

/** Typed array of each fixed-size datatype (FP16 as raw bits, BOOL as 0/1 bytes). */
const CTOR: Readonly<Record<FixedDatatype, ValuesCtor>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
}

/** Inclusive ranges of the integer datatypes stored as JS numbers. */
const INT_RANGE: Readonly<Partial<Record<Datatype, readonly [number, number]>>> = {
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
}

const I64_MIN = -(2n ** 63n)
const I64_MAX = 2n ** 63n - 1n
const U64_MAX = 2n ** 64n - 1n
const DECIMAL_RE = /^-?\d{1,20}$/

const utf8 = new TextEncoder()
const utf8Decoder = new TextDecoder()

const bad = (message: string): CohortError => new CohortError('BAD_REQUEST', message)

const fmtShape = (shape: readonly unknown[]): string => `[${shape.map((d) => safeString(d)).join(',')}]`

/** `a[i]` for an index the caller keeps in range: a read past the end is a bug here, not bad input. */
function item(a: ArrayLike<number>, i: number): number {
  const x = a[i]
  if (x === undefined) {
    throw new RangeError(`index ${i} is past the end (length ${a.length})`)
  }
  return x
}

/** The inclusive range of an integer datatype stored as JS numbers. */
function intRange(dt: Datatype): readonly [number, number] {
  const range = INT_RANGE[dt]
  if (range === undefined) {
    throw new Error(`${dt} has no integer range`)
  }
  return range
}

/** The little-endian u32 length prefix of a BYTES element at `at` (the caller has checked 4 bytes are there). */
function lengthPrefix(b: Uint8Array, at: number): number {
  return (item(b, at) | (item(b, at + 1) << 8) | (item(b, at + 2) << 16) | (item(b, at + 3) << 24)) >>> 0
}

/** Number of elements of a shape (1 for a scalar `[]`). Does not validate; see {@link checkShape}. */
export function elementCount(shape: readonly number[]): number {
  let n = 1
  for (const d of shape) {
    n *= d
  }
  return n
}

/**
 * Validate an untrusted shape: an array of at most {@link MAX_RANK} non-negative safe integers
 * with at most {@link MAX_ELEMENTS} elements. Returns it typed; throws BAD_REQUEST naming `label`.
 */
export function checkShape(shape: unknown, label = 'shape'): number[] {
  if (!Array.isArray(shape)) {
    throw bad(`${label} must be an array of non-negative integers`)
  }
  if (shape.length > MAX_RANK) {
    throw bad(`${label} has rank ${shape.length}, more than ${MAX_RANK}`)
  }
  let n = 1
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > MAX_ELEMENTS) {
      throw bad(`${label} must be an array of non-negative integers, got ${fmtShape(shape)}`)
    }
    n *= d
  }
  if (n > MAX_ELEMENTS) {
    throw bad(`${label} ${fmtShape(shape)} has ${n} elements, more than 2^31`)
  }
  return shape as number[]
}

/** Byte length of a fixed-size tensor; throws BAD_REQUEST for `BYTES` (variable length). */
export function fixedByteLength(datatype: Datatype, shape: readonly number[]): number {
  const size = DATATYPE_SIZE[datatype]
  if (!size) {
    throw bad(`${safeString(datatype)} has no fixed byte length`)
  }
  return elementCount(shape) * size
}

/** Offset just after `count` BYTES elements starting at `at`; throws BAD_REQUEST when truncated. */
function skipElements(b: Uint8Array, count: number, at = 0): number {
  const len = b.length
  for (let i = 0; i < count; i++) {
    if (at + 4 > len) {
      throw bad(`BYTES data truncated: element ${i} of ${count} has no length prefix`)
    }
    const n = lengthPrefix(b, at)
    at += 4 + n
    if (at > len) {
      throw bad(`BYTES data truncated: element ${i} of ${count} declares ${n} bytes`)
    }
  }
  return at
}

/**
 * Check that `bytes` holds exactly the data of `shape` for `datatype` (fixed: length = elements x size;
 * BYTES: exactly elements length-prefixed items). Throws BAD_REQUEST naming `label`.
 */
export function checkTensorBytes(datatype: Datatype, shape: readonly number[], bytes: Uint8Array, label = 'tensor'): void {
  const n = elementCount(shape)
  if (datatype === 'BYTES') {
    if (bytes.length < 4 * n) {
      throw bad(`${label}: BYTES shape ${fmtShape(shape)} needs at least ${4 * n} bytes, got ${bytes.length}`)
    }
    let end: number
    try {
      end = skipElements(bytes, n)
    } catch (e) {
      throw bad(`${label}: ${(e as Error).message}`)
    }
    if (end !== bytes.length) {
      throw bad(`${label}: BYTES data has ${bytes.length - end} trailing bytes after ${n} elements`)
    }
    return
  }
  const want = n * DATATYPE_SIZE[datatype]
  if (bytes.length !== want) {
    throw bad(`${label}: ${datatype} shape ${fmtShape(shape)} needs ${want} bytes, got ${bytes.length}`)
  }
}

/**
 * Validate an untrusted value as a {@link WireTensor} (known datatype, valid shape, Uint8Array bytes
 * matching the shape). Returns a fresh `{datatype, shape, bytes}`; throws BAD_REQUEST naming `label`.
 */
export function checkTensor(t: unknown, label = 'tensor'): WireTensor {
  if (typeof t !== 'object' || t === null || Array.isArray(t)) {
    throw bad(`${label} must be a map {datatype, shape, bytes}`)
  }
  const { datatype, shape, bytes } = t as Record<string, unknown>
  if (!isDatatype(datatype)) {
    throw bad(`${label}: unknown datatype ${JSON.stringify(safeString(datatype)).slice(0, 40)}`)
  }
  const s = checkShape(shape, `${label}: shape`)
  if (!(bytes instanceof Uint8Array)) {
    throw bad(`${label}: bytes must be binary (msgpack bin)`)
  }
  checkTensorBytes(datatype, s, bytes, label)
  return { datatype, shape: s, bytes }
}

/**
 * Encode BYTES elements in the Triton layout: per element a 4-byte little-endian uint32 length, then
 * its bytes. Strings are UTF-8 encoded.
 */
export function encodeBytesElements(elems: readonly (string | Uint8Array)[]): Uint8Array {
  const parts = new Array<Uint8Array>(elems.length)
  let total = 0
  for (let i = 0; i < elems.length; i++) {
    const e = elems[i]
    const p = typeof e === 'string' ? utf8.encode(e) : e
    if (!(p instanceof Uint8Array)) {
      throw bad(`BYTES element ${i} must be a string or Uint8Array`)
    }
    parts[i] = p
    total += 4 + p.length
  }
  const out = new Uint8Array(total)
  let at = 0
  for (const p of parts) {
    const n = p.length
    out[at] = n
    out[at + 1] = n >>> 8
    out[at + 2] = n >>> 16
    out[at + 3] = n >>> 24
    out.set(p, at + 4)
    at += 4 + n
  }
  return out
}

/**
 * Split Triton-layout BYTES data into its elements (zero-copy views). With `expectedCount`, exactly that
 * many elements must fill `bytes`; otherwise elements are read to the end. Truncated or trailing data
 * throws BAD_REQUEST.
 */
export function decodeBytesElements(bytes: Uint8Array, expectedCount?: number): Uint8Array[] {
  if (expectedCount !== undefined && bytes.length < 4 * expectedCount) {
    throw bad(`BYTES data of ${bytes.length} bytes cannot hold ${expectedCount} elements`)
  }
  const out: Uint8Array[] = []
  const len = bytes.length
  let at = 0
  while (expectedCount === undefined ? at < len : out.length < expectedCount) {
    const start = skipElements(bytes, 1, at)
    out.push(bytes.subarray(at + 4, start))
    at = start
  }
  if (at !== len) {
    throw bad(`BYTES data has ${len - at} trailing bytes after ${out.length} elements`)
  }
  return out
}

/**
 * The tensor's values as its natural typed array (BOOL: Uint8Array of 0/1, FP16: Uint16Array of raw
 * bits, INT64/UINT64: BigInt arrays, BYTES: UTF-8 decoded strings). Aligned data is viewed without
 * copying (the view shares memory with `t.bytes`); unaligned data is copied. Validates the byte length.
 */
export function toValues(t: WireTensor): TensorValues {
  const { datatype, shape, bytes } = t
  if (!isDatatype(datatype)) {
    throw bad(`unknown datatype ${safeString(datatype)}`)
  }
  checkTensorBytes(datatype, shape, bytes)
  const n = elementCount(shape)
  if (datatype === 'BYTES') {
    const out = new Array<string>(n)
    let at = 0
    for (let i = 0; i < n; i++) {
      const len = lengthPrefix(bytes, at)
      out[i] = utf8Decoder.decode(bytes.subarray(at + 4, at + 4 + len))
      at += 4 + len
    }
    return out
  }
  const Ctor = CTOR[datatype]
  const aligned = bytes.byteOffset % DATATYPE_SIZE[datatype] === 0
  const v = aligned ? new Ctor(bytes.buffer, bytes.byteOffset, n) : new Ctor(new Uint8Array(bytes).buffer, 0, n)
  if (datatype === 'BOOL') {
    const b = v as Uint8Array
    for (let i = 0; i < n; i++) {
      if (item(b, i) > 1) {
        const out = new Uint8Array(n)
        for (let j = 0; j < n; j++) out[j] = b[j] ? 1 : 0
        return out
      }
    }
  }
  return v
}

/**
 * Build a wire tensor from values (inverse of {@link toValues}). Fixed types need their natural typed
 * array (viewed without copying); FP16 also takes Float32Array/Float64Array (converted). BYTES takes
 * strings or Uint8Arrays. The count must match the shape (BAD_REQUEST otherwise).
 */
export function fromValues(datatype: Datatype, shape: readonly number[], values: TensorValues | Uint8Array[]): WireTensor {
  if (!isDatatype(datatype)) {
    throw bad(`unknown datatype ${safeString(datatype)}`)
  }
  const s = [...checkShape(shape)]
  const n = elementCount(s)
  if (values.length !== n) {
    throw bad(`${datatype} shape ${fmtShape(s)} needs ${n} elements, got ${values.length}`)
  }
  if (datatype === 'BYTES') {
    if (!Array.isArray(values)) {
      throw bad('BYTES values must be an array of strings or Uint8Arrays')
    }
    return { datatype, shape: s, bytes: encodeBytesElements(values) }
  }
  if (Array.isArray(values)) {
    throw bad(`${datatype} values must be a typed array`)
  }
  let v: FixedValues = values
  if (datatype === 'FP16' && (v instanceof Float32Array || v instanceof Float64Array)) {
    const bits = new Uint16Array(n)
    for (let i = 0; i < n; i++) bits[i] = f32ToF16Bits(item(v, i))
    v = bits
  }
  const Ctor = CTOR[datatype]
  if (!(v instanceof Ctor)) {
    throw bad(`${datatype} values must be a ${Ctor.name}, got ${v.constructor.name}`)
  }
  return { datatype, shape: s, bytes: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) }
}

/** Leaves of possibly nested arrays (nesting only looked for where the first element is an array). */
function countLeaves(a: readonly unknown[], label: string, depth: number): number {
  if (a.length === 0 || !Array.isArray(a[0])) {
    return a.length
  }
  if (depth > MAX_JSON_DEPTH) {
    throw bad(`${label}: data is nested more than ${MAX_JSON_DEPTH} deep`)
  }
  let c = 0
  for (const x of a) c += Array.isArray(x) ? countLeaves(x, label, depth + 1) : 1
  return c
}

const describe = (v: unknown): string => {
  if (typeof v === 'string') return JSON.stringify(v.length > 32 ? `${v.slice(0, 32)}...` : v)
  if (Array.isArray(v)) return 'an array'
  if (v === null || typeof v !== 'object') return String(v)
  return 'an object'
}

/** The largest finite value of each float datatype (JSON values past it are refused, not stored as ±Infinity). */
const FLOAT_MAX = { FP16: 65504, FP32: 3.4028234663852886e38, FP64: Number.MAX_VALUE } as const

/** Write the leaves of `a` (nested or flat) at `at` in `out`; returns the next index. */
function fill(dt: Datatype, a: readonly unknown[], out: FixedValues | string[], at: number, label: string): number {
  if (a.length > 0 && Array.isArray(a[0])) {
    for (const x of a) at = fill(dt, Array.isArray(x) ? x : [x], out, at, label)
    return at
  }
  const len = a.length
  const fail = (i: number, what: string): CohortError => bad(`${label}: element ${at + i} must be ${what} for ${dt}, got ${describe(a[i])}`)
  switch (dt) {
    case 'FP32':
    case 'FP64': {
      // A finite number past the type's range would be stored as ±Infinity: refused as non-finite
      // values are (a value under the smallest subnormal rounds to 0, as in any float conversion).
      const o = out as Float32Array | Float64Array
      for (let i = 0; i < len; i++) {
        const v = a[i]
        if (typeof v !== 'number') throw fail(i, 'a number')
        o[at + i] = v
        if (!Number.isFinite(o[at + i])) throw fail(i, `a finite number within ±${FLOAT_MAX[dt]}`)
      }
      break
    }
    case 'FP16': {
      const o = out as Uint16Array
      for (let i = 0; i < len; i++) {
        const v = a[i]
        if (typeof v !== 'number') throw fail(i, 'a number')
        const h = f32ToF16Bits(v)
        if ((h & 0x7c00) === 0x7c00) throw fail(i, `a finite number within ±${FLOAT_MAX.FP16}`)
        o[at + i] = h
      }
      break
    }
    case 'BOOL': {
      const o = out as Uint8Array
      for (let i = 0; i < len; i++) {
        const v = a[i]
        if (v === true || v === 1) o[at + i] = 1
        else if (v === false || v === 0) o[at + i] = 0
        else throw fail(i, 'true or false')
      }
      break
    }
    case 'INT64':
    case 'UINT64': {
      const o = out as BigInt64Array | BigUint64Array
      const lo = dt === 'INT64' ? I64_MIN : 0n
      const hi = dt === 'INT64' ? I64_MAX : U64_MAX
      for (let i = 0; i < len; i++) {
        const v = a[i]
        let b: bigint | undefined
        if (typeof v === 'number') b = Number.isSafeInteger(v) ? BigInt(v) : undefined
        else if (typeof v === 'string') b = DECIMAL_RE.test(v) ? BigInt(v) : undefined
        else if (typeof v === 'bigint') b = v
        if (b === undefined || b < lo || b > hi) throw fail(i, `a safe integer or decimal string in [${lo}, ${hi}]`)
        o[at + i] = b
      }
      break
    }
    case 'BYTES': {
      const o = out as string[]
      for (let i = 0; i < len; i++) {
        const v = a[i]
        if (typeof v !== 'string') throw fail(i, 'a string')
        o[at + i] = v
      }
      break
    }
    default: {
      const [lo, hi] = intRange(dt)
      const o = out as Int32Array
      for (let i = 0; i < len; i++) {
        const v = a[i]
        if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) throw fail(i, `an integer in [${lo}, ${hi}]`)
        o[at + i] = v
      }
    }
  }
  return at + len
}

/**
 * Build a wire tensor from an Open Inference Protocol JSON input. `data` may be flat or nested
 * (row-major); its element count must equal the shape's. Numbers for FP types, integers in range for
 * integer types (INT64/UINT64 also decimal strings), true/false/0/1 for BOOL, strings for BYTES.
 * Throws BAD_REQUEST with a message naming the input.
 */
export function jsonToTensor(name: string, datatype: Datatype, shape: number[], data: unknown): WireTensor {
  const label = `input ${JSON.stringify(name)}`
  if (!isDatatype(datatype)) {
    throw bad(`${label}: unknown datatype ${JSON.stringify(safeString(datatype)).slice(0, 40)}`)
  }
  const s = [...checkShape(shape, `${label}: shape`)]
  const n = elementCount(s)
  const flat = Array.isArray(data) ? data : [data]
  const got = countLeaves(flat, label, 1)
  if (got !== n) {
    throw bad(`${label}: shape ${fmtShape(s)} needs ${n} elements, got ${got}`)
  }
  if (datatype === 'BYTES') {
    const strs = new Array<string>(n)
    fill(datatype, flat, strs, 0, label)
    return { datatype, shape: s, bytes: encodeBytesElements(strs) }
  }
  const out = new CTOR[datatype](n)
  fill(datatype, flat, out, 0, label)
  return { datatype, shape: s, bytes: new Uint8Array(out.buffer, 0, out.byteLength) }
}

/**
 * A tensor's values as flat row-major JSON (OIP `data`): INT64/UINT64 as numbers (may lose precision
 * beyond 2^53), BOOL as booleans, FP16 as numbers, BYTES as UTF-8 strings.
 */
export function tensorToJson(t: WireTensor): (number | boolean | string)[] {
  const v = toValues(t)
  if (Array.isArray(v)) {
    return v
  }
  const n = v.length
  // Built by push, not new Array(n): a packed array, which JSON.stringify writes faster than a
  // holey one (64 floats: 4.7 against 6.6 µs per answer, issue 28).
  if (t.datatype === 'BOOL') {
    const out: boolean[] = []
    for (let i = 0; i < n; i++) out.push(v[i] !== 0)
    return out
  }
  const out: number[] = []
  if (t.datatype === 'FP16') {
    const h = v as Uint16Array
    for (let i = 0; i < n; i++) out.push(f16BitsToF32(item(h, i)))
  } else {
    for (let i = 0; i < n; i++) out.push(Number(v[i]))
  }
  return out
}

/** The shape without the batch dimension (shape[1..]). */
export function rowShape(t: WireTensor): number[] {
  return t.shape.slice(1)
}

/** A string key for a datatype and shape, e.g. `FP32[3,224,224]`. */
export function shapeKey(datatype: Datatype, shape: readonly number[]): string {
  return `${datatype}[${shape.join(',')}]`
}

/**
 * Batching key of a request's tensors: equal for two requests iff they have the same input names,
 * and per input the same datatype and row shape (shape[1..]). Name order does not matter.
 */
export function groupKeyOf(tensors: Readonly<Record<string, WireTensor>>): string {
  let key = ''
  const names = Object.keys(tensors)
  for (const name of names.length > 1 ? names.sort() : names) {
    const t = tensors[name]
    if (t === undefined) {
      throw new Error(`tensor ${name} listed but not present`)
    }
    // Length-prefixed: no name can end early or run into the next (no escaping needed).
    key += `${name.length}:${name}:${shapeKey(t.datatype, rowShape(t))};`
  }
  return key
}

/** Elements per row (product of shape[1..]); BAD_REQUEST for a scalar. */
function rowElements(t: WireTensor): number {
  if (t.shape.length === 0) {
    throw bad('a scalar tensor has no rows')
  }
  let n = 1
  for (let i = 1; i < t.shape.length; i++) n *= item(t.shape, i)
  return n
}

/**
 * Rows `start .. start+count-1` along dim 0, as a zero-copy view of `t.bytes`
 * (BYTES elements are walked to find the byte range). BAD_REQUEST for an out-of-range slice.
 */
export function sliceRows(t: WireTensor, start: number, count: number): WireTensor {
  const perRow = rowElements(t)
  const rows = item(t.shape, 0)
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(count) || start < 0 || count < 0 || start + count > rows) {
    throw bad(`cannot take rows ${start}..${start + count} of a tensor with ${rows} rows`)
  }
  const shape = [count, ...t.shape.slice(1)]
  const { datatype, bytes } = t
  if (datatype === 'BYTES') {
    const a = skipElements(bytes, start * perRow)
    return { datatype, shape, bytes: bytes.subarray(a, skipElements(bytes, count * perRow, a)) }
  }
  const rowBytes = perRow * DATATYPE_SIZE[datatype]
  if (bytes.length !== rows * rowBytes) {
    throw bad(`${datatype} shape ${fmtShape(t.shape)} needs ${rows * rowBytes} bytes, got ${bytes.length}`)
  }
  return { datatype, shape, bytes: bytes.subarray(start * rowBytes, (start + count) * rowBytes) }
}

/**
 * Split along dim 0 into consecutive parts of `counts[i]` rows (zero-copy views; BYTES is walked once).
 * The counts must sum to shape[0] (BAD_REQUEST otherwise). The inverse of {@link concatRows}.
 */
export function splitRows(t: WireTensor, counts: readonly number[]): WireTensor[] {
  const perRow = rowElements(t)
  let sum = 0
  for (const c of counts) sum += Number.isSafeInteger(c) && c >= 0 ? c : NaN
  if (sum !== t.shape[0]) {
    throw bad(`cannot split ${t.shape[0]} rows into parts of [${counts.join(',')}]`)
  }
  if (t.datatype !== 'BYTES') {
    sliceRows(t, 0, sum) // validates the byte length
  }
  const rest = t.shape.slice(1)
  const rowBytes = perRow * DATATYPE_SIZE[t.datatype]
  const out = new Array<WireTensor>(counts.length)
  let at = 0
  for (let i = 0; i < counts.length; i++) {
    const c = item(counts, i)
    const end = rowBytes ? at + c * rowBytes : skipElements(t.bytes, c * perRow, at)
    out[i] = { datatype: t.datatype, shape: [c, ...rest], bytes: t.bytes.subarray(at, end) }
    at = end
  }
  if (at !== t.bytes.length) {
    throw bad(`BYTES data has ${t.bytes.length - at} trailing bytes`)
  }
  return out
}

/**
 * Concatenate tensors along dim 0 (one copy; a single tensor, or rows adjacent in one buffer, come
 * back as a view without copying). All must share the
 * datatype and row shape (INVALID_INPUT otherwise); an empty list is BAD_REQUEST.
 */
export function concatRows(ts: readonly WireTensor[]): WireTensor {
  const first = ts[0]
  if (first === undefined) {
    throw bad('nothing to concatenate')
  }
  rowElements(first)
  if (ts.length === 1) {
    return first
  }
  const { datatype, shape } = first
  let rows = 0
  let total = 0
  for (const t of ts) {
    let same = t.datatype === datatype && t.shape.length === shape.length
    for (let i = 1; same && i < shape.length; i++) same = t.shape[i] === shape[i]
    if (!same) {
      throw new CohortError('INVALID_INPUT', `cannot batch ${shapeKey(t.datatype, rowShape(t))} rows with ${shapeKey(datatype, rowShape(first))} rows`)
    }
    rows += item(t.shape, 0)
    total += t.bytes.length
  }
  // Rows that lie one after another in one buffer (a request's rows from one batch's output): a view.
  let contiguous = true
  let prev: Uint8Array | undefined
  for (const { bytes: b } of ts) {
    if (prev !== undefined && (b.buffer !== prev.buffer || b.byteOffset !== prev.byteOffset + prev.byteLength)) {
      contiguous = false
      break
    }
    prev = b
  }
  if (contiguous) {
    return { datatype, shape: [rows, ...shape.slice(1)], bytes: new Uint8Array(first.bytes.buffer, first.bytes.byteOffset, total) }
  }
  wireCounts.copies++
  const bytes = new Uint8Array(total)
  let at = 0
  for (const t of ts) {
    bytes.set(t.bytes, at)
    at += t.bytes.length
  }
  return { datatype, shape: [rows, ...shape.slice(1)], bytes }
}

/** `String(v)` that never throws (decoded maps may carry a non-function `toString`). */
export function safeString(v: unknown): string {
  try {
    return typeof v === 'object' && v !== null ? Object.prototype.toString.call(v) : String(v)
  } catch {
    return typeof v
  }
}
