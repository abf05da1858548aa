/**
 * Values that cross a process boundary between stages (remote placement) travel as msgpack with
 * only standard types: typed arrays (other than Uint8Array) become `{ $ta: <ctor>, b: bytes }`
 * and are restored on the other side, so a stage sees the same values fused or remote.
 * @module
 */

/** The typed-array constructors that cross the bus by name (`{ $ta: <name> }`, and wire-batch's columns). */
export const TYPED = {
  Uint8Array,
  Int8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
} as const

/** A name of {@link TYPED}. */
export type TypedName = keyof typeof TYPED

const MARK = '$ta'

/** Replace typed arrays (except Uint8Array, which msgpack carries as `bin`) with tagged bytes. */
export function toWireValue(v: unknown): unknown {
  if (v === null || typeof v !== 'object') {
    return v
  }
  if (v instanceof Uint8Array) {
    return v
  }
  if (ArrayBuffer.isView(v)) {
    const name = v.constructor.name
    if (!(name in TYPED)) {
      throw new TypeError(`cannot send a ${name} between stages`)
    }
    return { [MARK]: name, b: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) }
  }
  if (Array.isArray(v)) {
    return v.map(toWireValue)
  }
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v)) {
    out[k] = toWireValue(x)
  }
  return out
}

/** Inverse of {@link toWireValue} (copies bytes to aligned memory). */
export function fromWireValue(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || v instanceof Uint8Array) {
    return v
  }
  if (Array.isArray(v)) {
    return v.map(fromWireValue)
  }
  const o = v as Record<string, unknown>
  const tag = o[MARK]
  if (typeof tag === 'string' && o['b'] instanceof Uint8Array && Object.keys(o).length === 2) {
    if (!Object.hasOwn(TYPED, tag)) {
      throw new TypeError(`unknown typed array ${tag}`)
    }
    const Ctor = TYPED[tag as TypedName]
    const bytes = o['b']
    const copy = new Uint8Array(bytes.byteLength)
    copy.set(bytes)
    return new Ctor(copy.buffer, 0, bytes.byteLength / Ctor.BYTES_PER_ELEMENT)
  }
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(o)) {
    out[k] = fromWireValue(x)
  }
  return out
}
