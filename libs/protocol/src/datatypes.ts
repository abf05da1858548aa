/**
 * Open Inference Protocol tensor datatypes and their element sizes.
 * @module
 */

/** Every datatype of the Open Inference Protocol v2 that Cohort carries. */
export const DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES'] as const

/** One Open Inference Protocol datatype name. */
export type Datatype = (typeof DATATYPES)[number]

/** Bytes per element; `BYTES` is variable (0 here): each element is a 4-byte LE length then the bytes. */
export const DATATYPE_SIZE: Readonly<Record<Datatype, number>> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  FP32: 4,
  FP64: 8,
  BYTES: 0,
}

/** True when `s` names a supported datatype. */
export function isDatatype(s: unknown): s is Datatype {
  return typeof s === 'string' && (DATATYPES as readonly string[]).includes(s)
}
