import { DATATYPE_SIZE, f32ToF16Bits, type Datatype } from '@cohort/protocol'
import { elementAt } from '../element-at.ts'
import { viewOf } from './ort-types.ts'

/** Value written into padded positions when none is given (`padValue`). */
export const DEFAULT_PAD_VALUE = 0

/** Length bucketing with padding for inputs with dynamic non-batch dims (tokens, pixels). */
export interface PaddingOptions {
  /** Value written into padded positions. @default DEFAULT_PAD_VALUE */
  padValue?: number
  /** A model input that Cohort fills with the attention mask (1 = real, 0 = padding); clients do not send it. */
  maskInput?: string
  /** Bucket bounds for each dynamic dim: a length L falls in the smallest bound >= L. @default powers of two */
  buckets?: number[]
}

/** The bucket bound of a length. */
export function bucketOf(len: number, buckets: readonly number[] | undefined): number {
  if (buckets && buckets.length > 0) {
    for (const b of buckets) {
      if (len <= b) {
        return b
      }
    }
    return Number.MAX_SAFE_INTEGER
  }
  let b = 1
  while (b < len) {
    b *= 2
  }
  return b
}

function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1)
  for (let i = shape.length - 2; i >= 0; i--) {
    s[i] = elementAt(s, i + 1) * elementAt(shape, i + 1)
  }
  return s
}

/**
 * Copy the overlapping corner of a row (`srcRest`) into a row of another shape (`dstRest`),
 * contiguous runs along the last dim. Used to pad (dst larger) and to crop (dst smaller).
 */
export function copyCorner(src: Uint8Array, srcRest: readonly number[], dst: Uint8Array, dstRest: readonly number[], elemSize: number): void {
  const rank = srcRest.length
  if (rank === 0) {
    dst.set(src.subarray(0, elemSize))
    return
  }
  const common = srcRest.map((d, i) => Math.min(d, elementAt(dstRest, i)))
  if (common.some((d) => d === 0)) {
    return
  }
  const ss = strides(srcRest)
  const ds = strides(dstRest)
  const run = elementAt(common, rank - 1) * elemSize
  const idx = new Array<number>(rank - 1).fill(0)
  for (;;) {
    let so = 0
    let doff = 0
    for (let k = 0; k < rank - 1; k++) {
      const i = elementAt(idx, k)
      so += i * elementAt(ss, k)
      doff += i * elementAt(ds, k)
    }
    dst.set(src.subarray(so * elemSize, so * elemSize + run), doff * elemSize)
    let k = rank - 2
    while (k >= 0) {
      const next = elementAt(idx, k) + 1
      idx[k] = next
      if (next < elementAt(common, k)) {
        break
      }
      idx[k] = 0
      k--
    }
    if (k < 0) {
      return
    }
  }
}

/** A buffer of `elements` values of `datatype`, every one set to `value`. */
export function filledBuffer(datatype: Datatype, elements: number, value: number): ArrayBuffer {
  const buf = new ArrayBuffer(elements * DATATYPE_SIZE[datatype])
  if (value !== 0) {
    const v = viewOf(datatype, buf, elements) as unknown as { fill(x: number | bigint): void }
    if (datatype === 'INT64' || datatype === 'UINT64') {
      v.fill(BigInt(Math.trunc(value)))
    } else if (datatype === 'FP16') {
      v.fill(f32ToF16Bits(value))
    } else {
      v.fill(value)
    }
  }
  return buf
}
