import * as ort from 'onnxruntime-node'
import { describe, expect, it } from 'vitest'
import { attr, encodeAttribute, encodeTensor, encodeValueInfo, float32ToFloat16Bits, graph, model, node, ONNX_DTYPE, tensorInit, valueInfo } from './onnx.ts'

/** A test-only protobuf reader: field number -> raw values (bigint varints, byte slices). */
type Field = { field: number; wire: number; value: bigint | Uint8Array }
function readVarint(b: Uint8Array, pos: number): [bigint, number] {
  let v = 0n
  let shift = 0n
  for (;;) {
    const byte = b[pos++] as number
    v |= BigInt(byte & 0x7f) << shift
    if (byte < 0x80) return [v, pos]
    shift += 7n
  }
}
function decode(b: Uint8Array): Field[] {
  const out: Field[] = []
  let pos = 0
  while (pos < b.length) {
    const [tag, p] = readVarint(b, pos)
    pos = p
    const field = Number(tag >> 3n)
    const wire = Number(tag & 7n)
    if (wire === 0) {
      const [v, q] = readVarint(b, pos)
      out.push({ field, wire, value: v })
      pos = q
    } else if (wire === 2) {
      const [len, q] = readVarint(b, pos)
      out.push({ field, wire, value: b.subarray(q, q + Number(len)) })
      pos = q + Number(len)
    } else if (wire === 5) {
      out.push({ field, wire, value: b.subarray(pos, pos + 4) })
      pos += 4
    } else if (wire === 1) {
      out.push({ field, wire, value: b.subarray(pos, pos + 8) })
      pos += 8
    } else throw new Error(`wire type ${wire}`)
  }
  return out
}
const text = (f: Field | undefined): string => new TextDecoder().decode(f?.value as Uint8Array)
const fields = (b: Uint8Array, n: number): Field[] => decode(b).filter((f) => f.field === n)

describe('ONNX encoding', () => {
  const g = graph({
    name: 'g',
    inputs: [valueInfo('x', 'FP32', ['batch', 3])],
    outputs: [valueInfo('y', 'FP32', ['batch', 3])],
    initializers: [tensorInit('alpha', 'FP32', [3], [1, 2, 3])],
    nodes: [node('Mul', ['x', 'alpha'], ['y'])],
  })

  it('writes ModelProto fields with the onnx.proto numbers', () => {
    const m = decode(model(g))
    expect(m.map((f) => f.field)).toEqual([1, 2, 7, 8])
    expect(m[0]?.value).toBe(8n) // ir_version
    expect(text(m[1])).toBe('cohort') // producer_name
    const opset = decode(m[3]?.value as Uint8Array)
    expect(text(opset[0])).toBe('') // domain
    expect(opset[1]?.value).toBe(17n) // version
    const gp = m[2]?.value as Uint8Array
    expect(decode(gp).map((f) => f.field)).toEqual([1, 2, 5, 11, 12]) // node, name, initializer, input, output
    expect(text(fields(gp, 2)[0])).toBe('g')
    const n = fields(gp, 1)[0]?.value as Uint8Array
    expect(fields(n, 1).map(text)).toEqual(['x', 'alpha'])
    expect(fields(n, 2).map(text)).toEqual(['y'])
    expect(text(fields(n, 4)[0])).toBe('Mul')
  })

  it('honours model options', () => {
    const m = decode(model(g, { irVersion: 9, opset: 19, producerName: 'p' }))
    expect(m[0]?.value).toBe(9n)
    expect(text(m[1])).toBe('p')
    expect(decode(m[3]?.value as Uint8Array)[1]?.value).toBe(19n)
  })

  it('writes TensorProto with dims, data_type, name and little-endian raw_data', () => {
    const t = decode(encodeTensor(tensorInit('w', 'INT16', [2, 2], [1, -1, 256, 0])))
    expect(t.map((f) => f.field)).toEqual([1, 2, 8, 9])
    expect(Array.from(t[0]?.value as Uint8Array)).toEqual([2, 2]) // packed dims
    expect(t[1]?.value).toBe(5n)
    expect(text(t[2])).toBe('w')
    expect(Array.from(t[3]?.value as Uint8Array)).toEqual([1, 0, 0xff, 0xff, 0, 1, 0, 0])
    const s = decode(encodeTensor(tensorInit('s', 'BYTES', [2], ['ab', Uint8Array.of(0, 255)])))
    expect(s.map((f) => f.field)).toEqual([1, 2, 6, 6, 8])
    expect(s[1]?.value).toBe(8n)
    expect(text(s[2])).toBe('ab')
    const scalar = decode(encodeTensor(tensorInit('k', 'INT64', [], [-1n])))
    expect(scalar.map((f) => f.field)).toEqual([2, 8, 9]) // no dims for a scalar
    expect(Array.from(scalar[2]?.value as Uint8Array)).toEqual(Array(8).fill(0xff))
  })

  it('writes ValueInfoProto with dim_value and dim_param', () => {
    const v = decode(encodeValueInfo(valueInfo('x', 'INT64', ['batch', 4])))
    expect(text(v[0])).toBe('x')
    const tensorType = decode(decode(v[1]?.value as Uint8Array)[0]?.value as Uint8Array)
    expect(tensorType[0]?.value).toBe(7n) // elem_type INT64
    const dims = decode(tensorType[1]?.value as Uint8Array).map((d) => decode(d.value as Uint8Array)[0])
    expect(dims[0]?.field).toBe(2)
    expect(text(dims[0])).toBe('batch')
    expect(dims[1]).toEqual({ field: 1, wire: 0, value: 4n })
  })

  it('writes typed attributes with their AttributeType', () => {
    const cases: [ReturnType<typeof attr.float>, number, number][] = [
      [attr.float(1), 2, 1],
      [attr.int(-3), 3, 2],
      [attr.string('s'), 4, 3],
      [attr.tensor(tensorInit('t', 'FP32', [1], [0])), 5, 4],
      [attr.floats([1, 2]), 7, 6],
      [attr.ints([1, 2]), 8, 7],
    ]
    for (const [value, field, type] of cases) {
      const a = decode(encodeAttribute('a', value))
      expect(a.map((f) => f.field)).toEqual([1, field, 20])
      expect(a[2]?.value).toBe(BigInt(type))
    }
  })

  it('maps shorthand attributes and refuses non-integer numbers', () => {
    const n = node('Op', ['a'], ['b'], { z: 1, a: [1, 2], m: 'x' })
    expect(n.name).toBe('Op_b')
    expect(n.attributes).toEqual([
      ['a', { kind: 'ints', value: [1, 2] }],
      ['m', { kind: 'string', value: 'x' }],
      ['z', { kind: 'int', value: 1 }],
    ])
    expect(() => node('Op', [], ['b'], { alpha: 0.5 })).toThrow(/attr\.float/)
    expect(() => node('Op', [], ['b'], { axes: [0.5] })).toThrow(/attr\.floats/)
  })

  it('validates tensor data against dims and dtypes', () => {
    expect(() => tensorInit('t', 'FP32', [2, 2], [1, 2, 3])).toThrow(RangeError)
    expect(() => encodeTensor(tensorInit('t', 'INT64', [1], [0.5]))).toThrow(TypeError)
    expect(() => valueInfo('v', 'FP8' as never, [1])).toThrow(TypeError)
  })

  it('maps Open Inference Protocol names onto ONNX data types', () => {
    expect(ONNX_DTYPE).toEqual({
      FP32: 1,
      UINT8: 2,
      INT8: 3,
      UINT16: 4,
      INT16: 5,
      INT32: 6,
      INT64: 7,
      BYTES: 8,
      BOOL: 9,
      FP16: 10,
      FP64: 11,
      UINT32: 12,
      UINT64: 13,
    })
  })

  it('rounds to half precision', () => {
    expect(float32ToFloat16Bits(1)).toBe(0x3c00)
    expect(float32ToFloat16Bits(-2)).toBe(0xc000)
    expect(float32ToFloat16Bits(65504)).toBe(0x7bff)
    expect(float32ToFloat16Bits(65520)).toBe(0x7c00) // rounds up to Inf
    expect(float32ToFloat16Bits(0.1)).toBe(0x2e66)
    expect(float32ToFloat16Bits(2 ** -24)).toBe(0x0001)
    expect(float32ToFloat16Bits(2 ** -25)).toBe(0x0000) // tie to even
    expect(float32ToFloat16Bits(-0)).toBe(0x8000)
    expect(float32ToFloat16Bits(Infinity)).toBe(0x7c00)
    expect(float32ToFloat16Bits(NaN) & 0x7e00).toBe(0x7e00)
  })

  it('produces initializers ONNX Runtime reads back for every numeric dtype', async () => {
    // Each initializer feeds an Identity to an output, so ORT must decode the raw_data correctly.
    const values: [Parameters<typeof tensorInit>[1], ort.Tensor.Type, ArrayLike<unknown>, unknown[]][] = [
      ['BOOL', 'bool', [true, false, 1], [1, 0, 1]],
      ['UINT8', 'uint8', [0, 255, 7], [0, 255, 7]],
      ['INT8', 'int8', [-128, 127, 0], [-128, 127, 0]],
      ['UINT16', 'uint16', [0, 65535, 300], [0, 65535, 300]],
      ['INT16', 'int16', [-32768, 32767, -1], [-32768, 32767, -1]],
      ['INT32', 'int32', [-(2 ** 31), 2 ** 31 - 1, 5], [-(2 ** 31), 2 ** 31 - 1, 5]],
      ['INT64', 'int64', [-(2n ** 63n), 2n ** 63n - 1n, -1], [-(2n ** 63n), 2n ** 63n - 1n, -1n]],
      ['UINT32', 'uint32', [0, 2 ** 32 - 1, 9], [0, 2 ** 32 - 1, 9]],
      ['UINT64', 'uint64', [0n, 2n ** 64n - 1n, 3], [0n, 2n ** 64n - 1n, 3n]],
      ['FP16', 'float16', [1, -2, 0.1], [0x3c00, 0xc000, 0x2e66]],
      ['FP32', 'float32', [1.5, -0, 3e38], [1.5, -0, Math.fround(3e38)]],
      ['FP64', 'float64', [0.1, -1e300, 5], [0.1, -1e300, 5]],
      ['BYTES', 'string', ['', 'héllo', '日本'], ['', 'héllo', '日本']],
    ]
    const bytes = model(
      graph({
        name: 'consts',
        inputs: [],
        outputs: values.map(([dt]) => valueInfo(`o_${dt}`, dt, [3])),
        initializers: values.map(([dt, , data]) => tensorInit(`c_${dt}`, dt, [3], data as ArrayLike<number>)),
        nodes: values.map(([dt]) => node('Identity', [`c_${dt}`], [`o_${dt}`])),
      }),
    )
    const session = await ort.InferenceSession.create(bytes)
    const out = await session.run({})
    for (const [dt, type, , expected] of values) {
      const t = out[`o_${dt}`] as ort.Tensor
      expect(t.type, dt).toBe(type)
      expect(Array.from(t.data as ArrayLike<unknown>), dt).toEqual(expected)
    }
  })
})
