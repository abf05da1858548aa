import type { Datatype } from './datatypes.ts'

/**
 * A tensor as it travels on the wire: datatype, shape and raw little-endian row-major bytes.
 * For `BYTES`, `bytes` holds each element as a 4-byte little-endian length followed by its bytes
 * (the Triton binary tensor layout). `bytes` may be a view at any byte offset: use the codec's
 * helpers (which copy to aligned memory) before making typed-array views.
 */
export interface WireTensor {
  datatype: Datatype
  shape: number[]
  bytes: Uint8Array
}
