import { mulberry32 } from '@cohort/onnx-builder'

/** One OIP JSON request for the benchmarked MLP: 1 item of `features` seeded floats (demo: 256). */
export function demoBody(features = 256): string {
  const r = mulberry32(7)
  const data = Array.from({ length: features }, () => Math.fround(r() * 2 - 1))
  return JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, features], data }] })
}

/** One OIP JSON request for the Identity `floor` model (written by `writeFloorModel`). */
export const FLOOR_BODY = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 1], data: [0.5] }] })
