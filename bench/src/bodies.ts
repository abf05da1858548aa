import { mulberry32 } from '@cohort/onnx-builder'

/** One OIP JSON request for the benchmarked MLP: 1 item of `features` seeded floats (demo: 256). */
export function demoBody(features = 256): string {
  const r = mulberry32(7)
  const data = Array.from({ length: features }, () => Math.fround(r() * 2 - 1))
  return JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, features], data }] })
}

/**
 * The same request in the binary tensor data extension (what `perf_analyzer` sends over HTTP): a
 * JSON header naming `binary_data_size`, then the raw little-endian FP32 bytes; the output is
 * asked for as JSON. `headerLength` goes in `Inference-Header-Content-Length`.
 */
export function demoBinaryBody(features = 256): { bytes: Uint8Array; headerLength: number } {
  const r = mulberry32(7)
  const data = Float32Array.from({ length: features }, () => Math.fround(r() * 2 - 1))
  const header = new TextEncoder().encode(
    JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, features], parameters: { binary_data_size: data.byteLength } }] }),
  )
  const bytes = new Uint8Array(header.byteLength + data.byteLength)
  bytes.set(header, 0)
  bytes.set(new Uint8Array(data.buffer), header.byteLength)
  return { bytes, headerLength: header.byteLength }
}

/** One OIP JSON request for the Identity `floor` model (written by `writeFloorModel`). */
export const FLOOR_BODY = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 1], data: [0.5] }] })
