import { describe, expect, it } from 'vitest'
import { CohortError, decodeBytesElements, toValues } from '@cohort/protocol'
import { grpcInputs } from './tensors.ts'

describe('grpcInputs', () => {
  it('reads typed contents: fp32, int64 (longs as strings), bool, bytes', () => {
    const { tensors, itemCount } = grpcInputs(
      [
        { name: 'f', datatype: 'FP32', shape: ['2', '1'], contents: { fp32_contents: [1.5, -2] } },
        { name: 'i', datatype: 'INT64', shape: [2], contents: { int64_contents: ['9007199254740993', '-1'] } },
        { name: 'b', datatype: 'BOOL', shape: [2], contents: { bool_contents: [true, false] } },
        { name: 's', datatype: 'BYTES', shape: [2], contents: { bytes_contents: [new TextEncoder().encode('hé'), new Uint8Array(0)] } },
      ],
      [],
    )
    expect(itemCount).toBe(2)
    expect(Array.from(toValues(tensors['f']!) as Float32Array)).toEqual([1.5, -2])
    expect(Array.from(toValues(tensors['i']!) as BigInt64Array)).toEqual([9007199254740993n, -1n])
    expect(Array.from(toValues(tensors['b']!) as Uint8Array)).toEqual([1, 0])
    expect(decodeBytesElements(tensors['s']!.bytes, 2).map((b) => new TextDecoder().decode(b))).toEqual(['hé', ''])
  })

  it('reads raw_input_contents in input order (FP16 is raw only)', () => {
    const raw = [new Uint8Array([0, 0x3c, 0, 0xc0]), new Uint8Array(8)]
    const { tensors } = grpcInputs(
      [
        { name: 'h', datatype: 'FP16', shape: [2] },
        { name: 'x', datatype: 'INT32', shape: [2] },
      ],
      raw,
    )
    expect(tensors['h']).toEqual({ datatype: 'FP16', shape: [2], bytes: raw[0] })
    expect(tensors['x']!.bytes).toBe(raw[1])
  })

  it.each([
    ['no inputs', [], []],
    ['raw count mismatch', [{ name: 'a', datatype: 'FP32', shape: [1] }], [new Uint8Array(4), new Uint8Array(4)]],
    ['raw size mismatch', [{ name: 'a', datatype: 'FP32', shape: [2] }], [new Uint8Array(4)]],
    ['typed FP16', [{ name: 'a', datatype: 'FP16', shape: [1], contents: {} }], []],
    ['missing contents', [{ name: 'a', datatype: 'FP32', shape: [1] }], []],
    ['wrong element count', [{ name: 'a', datatype: 'FP32', shape: [2], contents: { fp32_contents: [1] } }], []],
    ['unknown datatype', [{ name: 'a', datatype: 'FP8', shape: [1], contents: {} }], []],
    ['scalar shape', [{ name: 'a', datatype: 'FP32', shape: [], contents: { fp32_contents: [1] } }], []],
    ['zero items', [{ name: 'a', datatype: 'FP32', shape: [0], contents: { fp32_contents: [] } }], []],
    [
      'items disagree',
      [
        { name: 'a', datatype: 'FP32', shape: [1], contents: { fp32_contents: [1] } },
        { name: 'b', datatype: 'FP32', shape: [2], contents: { fp32_contents: [1, 2] } },
      ],
      [],
    ],
    [
      'duplicate name',
      [
        { name: 'a', datatype: 'FP32', shape: [1], contents: { fp32_contents: [1] } },
        { name: 'a', datatype: 'FP32', shape: [1], contents: { fp32_contents: [1] } },
      ],
      [],
    ],
  ])('rejects %s with BAD_REQUEST', (_what, inputs, raw) => {
    try {
      grpcInputs(inputs as never, raw)
      expect.unreachable()
    } catch (e) {
      expect(e).toBeInstanceOf(CohortError)
      expect((e as CohortError).code).toBe('BAD_REQUEST')
    }
  })
})
