import type { Datatype } from '@cohort/protocol'

const TO_ORT: Record<Datatype, string> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  INT8: 'int8',
  UINT16: 'uint16',
  INT16: 'int16',
  UINT32: 'uint32',
  INT32: 'int32',
  UINT64: 'uint64',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
}

const FROM_ORT: Record<string, Datatype> = Object.fromEntries(Object.entries(TO_ORT).map(([k, v]) => [v, k as Datatype]))

/** ORT tensor type of an OIP datatype. */
export function ortType(d: Datatype): string {
  return TO_ORT[d]
}

/** OIP datatype of an ORT tensor type, or undefined when Cohort cannot carry it. */
export function datatypeOfOrt(t: string): Datatype | undefined {
  return FROM_ORT[t]
}

type TypedCtor = new (buf: ArrayBuffer, offset: number, length: number) => ArrayBufferView

const VIEW: Partial<Record<Datatype, TypedCtor>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  INT8: Int8Array,
  UINT16: Uint16Array,
  INT16: Int16Array,
  UINT32: Uint32Array,
  INT32: Int32Array,
  UINT64: BigUint64Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
}

/** A typed-array view of the right element type over an aligned buffer. */
export function viewOf(d: Datatype, buf: ArrayBuffer, elements: number): ArrayBufferView {
  const C = VIEW[d]
  if (!C) {
    throw new TypeError(`no typed view for ${d}`)
  }
  return new C(buf, 0, elements)
}
