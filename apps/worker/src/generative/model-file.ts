/**
 * What the generator reads from a decoder's ONNX file itself: `ModelProto.metadata_props` (the
 * builder writes `cohort.kv_layout`, `cohort.eos_token_id`, `cohort.max_context`) and whether the
 * graph uses `com.microsoft.GroupQueryAttention` (the served KV layout). A top-level protobuf scan,
 * the graph is skipped by its length.
 * @module
 */

function varint(b: Uint8Array, at: { i: number }): number {
  let x = 0
  let mul = 1
  for (;;) {
    const c = b[at.i++]
    if (c === undefined) throw new RangeError('truncated varint')
    x += (c & 0x7f) * mul
    if (c < 0x80) return x
    mul *= 128
  }
}

/** `metadata_props` of an ONNX ModelProto (empty when there are none or the bytes are not one). */
export function onnxMetadata(bytes: Uint8Array): Record<string, string> {
  const out: Record<string, string> = {}
  const dec = new TextDecoder()
  try {
    const at = { i: 0 }
    while (at.i < bytes.length) {
      const key = varint(bytes, at)
      const field = Math.floor(key / 8)
      const wire = key & 7
      if (wire === 0) varint(bytes, at)
      else if (wire === 1) at.i += 8
      else if (wire === 5) at.i += 4
      else if (wire === 2) {
        const len = varint(bytes, at)
        if (field === 14) {
          const m = bytes.subarray(at.i, at.i + len)
          const q = { i: 0 }
          let k = ''
          let v = ''
          while (q.i < m.length) {
            const kk = varint(m, q)
            const l = varint(m, q)
            const s = dec.decode(m.subarray(q.i, q.i + l))
            q.i += l
            if (kk >> 3 === 1) k = s
            else if (kk >> 3 === 2) v = s
          }
          out[k] = v
        }
        at.i += len
      } else break
    }
  } catch {
    // not a ModelProto we can read: no metadata
  }
  return out
}

/** True when the file names the GroupQueryAttention op. */
export function usesGroupQueryAttention(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf('GroupQueryAttention') >= 0
}
