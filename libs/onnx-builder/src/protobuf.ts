/**
 * A minimal protobuf wire-format writer: varints, length-delimited fields, packed repeated
 * scalars and fixed32/fixed64. Enough to serialise the subset of onnx.proto that Cohort needs.
 * Pure and runtime-agnostic: it only produces `Uint8Array`s.
 * @module
 */

/** Protobuf wire types. */
export const WireType = {
  VARINT: 0,
  FIXED64: 1,
  LENGTH_DELIMITED: 2,
  FIXED32: 5,
} as const

const TWO_64 = 1n << 64n
const MASK_64 = TWO_64 - 1n
const utf8 = new TextEncoder()

/**
 * Encodes an integer as a base-128 varint. Negative values are sign-extended to 64 bits
 * (two's complement), so they always take 10 bytes, as protobuf does for `int32`/`int64`.
 * @throws RangeError when `value` is not an integer or does not fit in 64 bits.
 */
export function encodeVarint(value: number | bigint): Uint8Array {
  const out: number[] = []
  pushVarint(out, value)
  return Uint8Array.from(out)
}

function pushVarint(out: number[], value: number | bigint): void {
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new RangeError(`varint: not an integer: ${value}`)
    if (value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
      let v = value
      while (v >= 0x80) {
        out.push((v % 0x80) | 0x80)
        v = Math.floor(v / 0x80)
      }
      out.push(v)
      return
    }
    value = BigInt(value)
  }
  if (value < -(1n << 63n) || value >= TWO_64) throw new RangeError(`varint: out of 64-bit range: ${value}`)
  let v = value & MASK_64
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80)
    v >>= 7n
  }
  out.push(Number(v))
}

/**
 * Appends protobuf fields to a growable buffer. Call the field methods in the order the fields
 * should appear (field-number order gives canonical output), then {@link ProtoWriter.finish}.
 */
export class ProtoWriter {
  private buf = new Uint8Array(64)
  private len = 0
  private readonly scratch: number[] = []

  private ensure(extra: number): void {
    if (this.len + extra <= this.buf.length) return
    let cap = this.buf.length * 2
    while (cap < this.len + extra) cap *= 2
    const next = new Uint8Array(cap)
    next.set(this.buf.subarray(0, this.len))
    this.buf = next
  }

  private raw(bytes: ArrayLike<number>): void {
    this.ensure(bytes.length)
    this.buf.set(bytes, this.len)
    this.len += bytes.length
  }

  private varintRaw(value: number | bigint): void {
    this.scratch.length = 0
    pushVarint(this.scratch, value)
    this.raw(this.scratch)
  }

  private tag(field: number, wire: number): void {
    if (!Number.isInteger(field) || field < 1 || field > 0x1fffffff) throw new RangeError(`bad field number ${field}`)
    this.varintRaw(field * 8 + wire)
  }

  /** Writes a varint field (`int32`, `int64`, `uint64`, `enum`, `bool`); negatives take 10 bytes. */
  varint(field: number, value: number | bigint | boolean): this {
    this.tag(field, WireType.VARINT)
    this.varintRaw(typeof value === 'boolean' ? (value ? 1 : 0) : value)
    return this
  }

  /** Writes a `float` field (fixed32, IEEE 754 little-endian). */
  float(field: number, value: number): this {
    this.tag(field, WireType.FIXED32)
    this.ensure(4)
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 4).setFloat32(0, value, true)
    this.len += 4
    return this
  }

  /** Writes a `double` field (fixed64, IEEE 754 little-endian). */
  double(field: number, value: number): this {
    this.tag(field, WireType.FIXED64)
    this.ensure(8)
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 8).setFloat64(0, value, true)
    this.len += 8
    return this
  }

  /** Writes a `fixed32` field (unsigned 32-bit little-endian). */
  fixed32(field: number, value: number): this {
    this.tag(field, WireType.FIXED32)
    this.ensure(4)
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 4).setUint32(0, value >>> 0, true)
    this.len += 4
    return this
  }

  /** Writes a `fixed64` field (64-bit little-endian; negatives as two's complement). */
  fixed64(field: number, value: number | bigint): this {
    this.tag(field, WireType.FIXED64)
    this.ensure(8)
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 8).setBigUint64(0, BigInt(value) & MASK_64, true)
    this.len += 8
    return this
  }

  /** Writes a length-delimited `bytes` field (also used for embedded messages). */
  bytes(field: number, value: Uint8Array): this {
    this.tag(field, WireType.LENGTH_DELIMITED)
    this.varintRaw(value.length)
    this.raw(value)
    return this
  }

  /** Writes a `string` field as UTF-8. */
  string(field: number, value: string): this {
    return this.bytes(field, utf8.encode(value))
  }

  /** Writes an embedded message field from its already-encoded bytes. */
  message(field: number, encoded: Uint8Array): this {
    return this.bytes(field, encoded)
  }

  /** Writes a packed repeated varint field; writes nothing when `values` is empty. */
  packedVarint(field: number, values: ArrayLike<number | bigint>): this {
    if (values.length === 0) return this
    const body: number[] = []
    for (let i = 0; i < values.length; i++) pushVarint(body, values[i] as number | bigint)
    return this.bytes(field, Uint8Array.from(body))
  }

  /** Writes a packed repeated `float` field; writes nothing when `values` is empty. */
  packedFloat(field: number, values: ArrayLike<number>): this {
    if (values.length === 0) return this
    const body = new Uint8Array(values.length * 4)
    const dv = new DataView(body.buffer)
    for (let i = 0; i < values.length; i++) dv.setFloat32(i * 4, values[i] as number, true)
    return this.bytes(field, body)
  }

  /** Bytes written so far. */
  get length(): number {
    return this.len
  }

  /** Returns a copy of the bytes written so far. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.len)
  }
}
