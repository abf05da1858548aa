import { describe, expect, it } from 'vitest'
import { decodeRequest, encodeRequest, wireCounts } from './codec.ts'
import { DATATYPES, DATATYPE_SIZE, type Datatype } from './datatypes.ts'
import { CohortError } from './errors.ts'
import type { WireTensor } from './tensor.ts'
import {
  checkShape,
  concatRows,
  decodeBytesElements,
  elementCount,
  encodeBytesElements,
  fixedByteLength,
  fromValues,
  groupKeyOf,
  jsonToTensor,
  rowShape,
  shapeKey,
  sliceRows,
  splitRows,
  tensorToJson,
  toValues,
} from './tensor-data.ts'

/** Expect `fn` to throw a CohortError with `code` (and a message matching `msg`, if given). */
function expectCohort(fn: () => unknown, code = 'BAD_REQUEST', msg?: RegExp | string): CohortError {
  try {
    fn()
  } catch (e) {
    expect(e).toBeInstanceOf(CohortError)
    expect((e as CohortError).code).toBe(code)
    if (msg !== undefined) expect((e as CohortError).message).toMatch(msg)
    return e as CohortError
  }
  throw new Error('expected a CohortError')
}

/** JSON data (shape [2,3]) and the JSON it should come back as, per datatype. */
const SAMPLES: Record<Datatype, { data: unknown[]; json: unknown[] }> = {
  BOOL: { data: [true, false, 1, 0, true, false], json: [true, false, true, false, true, false] },
  UINT8: { data: [0, 1, 2, 127, 128, 255], json: [0, 1, 2, 127, 128, 255] },
  INT8: { data: [-128, -1, 0, 1, 100, 127], json: [-128, -1, 0, 1, 100, 127] },
  UINT16: { data: [0, 1, 256, 1000, 40000, 65535], json: [0, 1, 256, 1000, 40000, 65535] },
  INT16: { data: [-32768, -1, 0, 1, 300, 32767], json: [-32768, -1, 0, 1, 300, 32767] },
  UINT32: { data: [0, 1, 65536, 2 ** 31, 7, 4294967295], json: [0, 1, 65536, 2 ** 31, 7, 4294967295] },
  INT32: { data: [-2147483648, -1, 0, 1, 70000, 2147483647], json: [-2147483648, -1, 0, 1, 70000, 2147483647] },
  UINT64: {
    data: [0, 2 ** 53 - 1, '18446744073709551615', '12', 5, '0'],
    json: [0, 2 ** 53 - 1, 18446744073709551615, 12, 5, 0],
  },
  INT64: {
    data: ['-9223372036854775808', '9223372036854775807', -(2 ** 53 - 1), -1, 0, '-42'],
    json: [-9223372036854775808, 9223372036854775807, -(2 ** 53 - 1), -1, 0, -42],
  },
  FP16: { data: [0, -2, 0.5, 65504, 65519, 0.1], json: [0, -2, 0.5, 65504, 65504, 0.0999755859375] },
  FP32: { data: [0, -1.5, 0.25, 3e38, 1e-40, 0.1], json: [0, -1.5, 0.25, Math.fround(3e38), Math.fround(1e-40), Math.fround(0.1)] },
  FP64: { data: [0, -1.5, Math.PI, 1e308, 5e-324, 0.1], json: [0, -1.5, Math.PI, 1e308, 5e-324, 0.1] },
  BYTES: { data: ['', 'héllo', '日本語', '🎉 emoji', '', 'x'], json: ['', 'héllo', '日本語', '🎉 emoji', '', 'x'] },
}

const nested = (flat: unknown[]) => [flat.slice(0, 3), flat.slice(3)]

/** A copy of `bytes` that starts at byte offset `offset` of a larger buffer. */
function at(bytes: Uint8Array, offset: number): Uint8Array {
  const buf = new Uint8Array(bytes.length + offset + 8)
  buf.set(bytes, offset)
  return buf.subarray(offset, offset + bytes.length)
}

describe('shapes', () => {
  it('counts elements and fixed byte lengths', () => {
    expect(elementCount([])).toBe(1)
    expect(elementCount([2, 3, 4])).toBe(24)
    expect(elementCount([0, 5])).toBe(0)
    expect(fixedByteLength('FP32', [2, 3])).toBe(24)
    expect(fixedByteLength('INT64', [])).toBe(8)
    expectCohort(() => fixedByteLength('BYTES', [1]))
  })

  it('validates shapes', () => {
    expect(checkShape([1, 0, 3])).toEqual([1, 0, 3])
    expect(checkShape([])).toEqual([])
    for (const s of [[-1], [1.5], ['2'], 'x', null, [NaN], [Infinity], Array(17).fill(1), [2 ** 16, 2 ** 16], [2 ** 53, 0]]) {
      expectCohort(() => checkShape(s))
    }
    expect(shapeKey('FP32', [3, 4])).toBe('FP32[3,4]')
  })
})

describe('round trips', () => {
  for (const dt of DATATYPES) {
    it(`${dt}: JSON -> request -> values/JSON`, () => {
      const { data, json } = SAMPLES[dt]
      const offsets = new Set<number>()
      for (const input of [data, nested(data)]) {
        const t = jsonToTensor('x', dt, [2, 3], input)
        expect(t.shape).toEqual([2, 3])
        // ids of 1..8 chars move the tensor's bytes to every alignment inside the encoded message
        for (let pad = 1; pad <= 8; pad++) {
          const req = { v: 1 as const, id: 'i'.repeat(pad), model: 'm', deadline: 1, tensors: { x: t } }
          const back = decodeRequest(encodeRequest(req)).tensors!.x!
          offsets.add(back.bytes.byteOffset % 8)
          expect(back.datatype).toBe(dt)
          expect(back.shape).toEqual([2, 3])
          expect([...back.bytes]).toEqual([...t.bytes])
          expect(tensorToJson(back)).toEqual(json)
          const values = toValues(back)
          expect(values.length).toBe(6)
          if (!Array.isArray(values)) expect(values.byteOffset % DATATYPE_SIZE[dt]).toBe(0)
          const again = fromValues(dt, [2, 3], values)
          expect([...again.bytes]).toEqual([...t.bytes])
        }
      }
      expect(offsets.size).toBe(8) // every alignment was exercised
    })
  }

  it('copies unaligned data and views aligned data', () => {
    const t = jsonToTensor('x', 'FP32', [4], [1, 2, 3, 4.5])
    for (let offset = 0; offset < 8; offset++) {
      const bytes = at(t.bytes, offset)
      const v = toValues({ ...t, bytes }) as Float32Array
      expect(v).toBeInstanceOf(Float32Array)
      expect([...v]).toEqual([1, 2, 3, 4.5])
      expect(v.byteOffset % 4).toBe(0)
      expect(v.buffer === bytes.buffer).toBe(offset % 4 === 0)
    }
    const big = jsonToTensor('y', 'INT64', [2], ['-5', '9007199254740993'])
    for (const offset of [1, 3, 4, 7]) {
      const v = toValues({ ...big, bytes: at(big.bytes, offset) }) as BigInt64Array
      expect(v).toBeInstanceOf(BigInt64Array)
      expect([...v]).toEqual([-5n, 9007199254740993n])
    }
    const half = jsonToTensor('h', 'FP16', [3], [1, -0.5, 2])
    expect(tensorToJson({ ...half, bytes: at(half.bytes, 1) })).toEqual([1, -0.5, 2])
  })

  it('returns the natural typed arrays', () => {
    const kinds: [Datatype, unknown][] = [
      ['BOOL', Uint8Array],
      ['UINT8', Uint8Array],
      ['INT8', Int8Array],
      ['UINT16', Uint16Array],
      ['INT16', Int16Array],
      ['UINT32', Uint32Array],
      ['INT32', Int32Array],
      ['UINT64', BigUint64Array],
      ['INT64', BigInt64Array],
      ['FP16', Uint16Array],
      ['FP32', Float32Array],
      ['FP64', Float64Array],
    ]
    for (const [dt, ctor] of kinds) {
      expect(toValues(jsonToTensor('x', dt, [1], [1]))).toBeInstanceOf(ctor)
    }
    expect(toValues(jsonToTensor('x', 'FP16', [1], [1]))).toEqual(new Uint16Array([0x3c00]))
  })

  it('normalizes BOOL bytes to 0/1', () => {
    const v = toValues({ datatype: 'BOOL', shape: [3], bytes: new Uint8Array([0, 2, 255]) })
    expect([...v]).toEqual([0, 1, 1])
    expect(tensorToJson({ datatype: 'BOOL', shape: [3], bytes: new Uint8Array([0, 2, 1]) })).toEqual([false, true, true])
  })

  it('validates byte length in toValues', () => {
    expectCohort(() => toValues({ datatype: 'FP32', shape: [2], bytes: new Uint8Array(7) }), 'BAD_REQUEST', /needs 8 bytes, got 7/)
    expectCohort(() => toValues({ datatype: 'BYTES', shape: [2], bytes: encodeBytesElements(['a']) }))
    expectCohort(() => toValues({ datatype: 'FP8' as Datatype, shape: [1], bytes: new Uint8Array(1) }))
  })

  it('builds tensors from values', () => {
    const f = new Float32Array([1, 2, 3, 4])
    const t = fromValues('FP32', [2, 2], f)
    expect(t.bytes.buffer).toBe(f.buffer) // zero-copy
    expect(tensorToJson(fromValues('FP16', [2], new Float32Array([1, 0.5])))).toEqual([1, 0.5])
    expect(tensorToJson(fromValues('BYTES', [2], [new Uint8Array([104, 105]), new Uint8Array(0)]))).toEqual(['hi', ''])
    expect(tensorToJson(fromValues('BYTES', [1], ['ü']))).toEqual(['ü'])
    expectCohort(() => fromValues('FP32', [2], new Float64Array(2)), 'BAD_REQUEST', /Float32Array/)
    expectCohort(() => fromValues('FP32', [3], new Float32Array(2)), 'BAD_REQUEST', /needs 3 elements, got 2/)
    expectCohort(() => fromValues('INT32', [1], ['1']))
    expectCohort(() => fromValues('BYTES', [1], new Uint8Array(1)))
  })
})

describe('BYTES elements', () => {
  it('encodes the Triton layout', () => {
    expect([...encodeBytesElements([])]).toEqual([])
    expect([...encodeBytesElements(['', 'é', new Uint8Array([7])])]).toEqual([0, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9, 1, 0, 0, 0, 7])
    const long = 'x'.repeat(70000)
    const enc = encodeBytesElements([long])
    expect([...enc.subarray(0, 4)]).toEqual([0x70, 0x11, 0x01, 0])
    expect(decodeBytesElements(enc, 1)[0]!.length).toBe(70000)
  })

  it('decodes and rejects garbled data', () => {
    const enc = encodeBytesElements(['ab', '', 'c'])
    const els = decodeBytesElements(enc)
    expect(els.map((e) => [...e])).toEqual([[97, 98], [], [99]])
    expect(decodeBytesElements(enc, 3).length).toBe(3)
    expect(decodeBytesElements(at(enc, 3), 3).map((e) => [...e])).toEqual([[97, 98], [], [99]])
    expect(decodeBytesElements(new Uint8Array(0), 0)).toEqual([])
    expectCohort(() => decodeBytesElements(enc, 2), 'BAD_REQUEST', /trailing/)
    expectCohort(() => decodeBytesElements(enc, 4))
    expectCohort(() => decodeBytesElements(enc.subarray(0, enc.length - 1)))
    expectCohort(() => decodeBytesElements(new Uint8Array([1, 0, 0])))
    expectCohort(() => decodeBytesElements(new Uint8Array([255, 255, 255, 255, 1])))
    expectCohort(() => decodeBytesElements(new Uint8Array(8), 3))
    expectCohort(() => encodeBytesElements([1 as unknown as string]))
  })
})

describe('jsonToTensor', () => {
  it('names the input in count errors', () => {
    expectCohort(() => jsonToTensor('x', 'FP32', [2, 3], [1, 2, 3, 4, 5]), 'BAD_REQUEST', 'input "x": shape [2,3] needs 6 elements, got 5')
    expectCohort(
      () =>
        jsonToTensor(
          'x',
          'FP32',
          [2, 3],
          [
            [1, 2, 3],
            [4, 5],
          ],
        ),
      'BAD_REQUEST',
      /needs 6 elements, got 5/,
    )
  })

  it('accepts scalars, empty tensors and ragged nesting with the right count', () => {
    expect(tensorToJson(jsonToTensor('s', 'INT32', [], 7))).toEqual([7])
    expect(tensorToJson(jsonToTensor('s', 'INT32', [], [7]))).toEqual([7])
    expect(jsonToTensor('e', 'FP32', [0, 3], []).bytes.length).toBe(0)
    expect(tensorToJson(jsonToTensor('r', 'INT8', [2, 2], [[1], [2, 3, 4]]))).toEqual([1, 2, 3, 4])
    expect(tensorToJson(jsonToTensor('m', 'INT8', [3], [[1, 2], 3]))).toEqual([1, 2, 3])
  })

  it('rejects bad values', () => {
    const bad: [Datatype, unknown][] = [
      ['FP32', 'a'],
      ['FP64', null],
      ['FP16', true],
      ['INT32', 1.5],
      ['INT8', 128],
      ['INT8', -129],
      ['UINT8', -1],
      ['UINT16', 65536],
      ['UINT32', 2 ** 32],
      ['INT32', 2 ** 31],
      ['INT64', 2 ** 53],
      ['INT64', '9223372036854775808'],
      ['INT64', 'abc'],
      ['INT64', '1e3'],
      ['INT64', 1.5],
      ['UINT64', -1],
      ['UINT64', '-1'],
      ['UINT64', '18446744073709551616'],
      ['BOOL', 2],
      ['BOOL', 'true'],
      ['BYTES', 5],
      ['BYTES', null],
      ['INT32', [1]],
      ['INT32', {}],
      // Past the float type's range: stored as ±Infinity, so refused as non-finite values are.
      ['FP32', 1e39],
      ['FP32', -1e39],
      ['FP32', 3.5e38],
      ['FP16', 65520],
      ['FP16', -1e6],
      ['FP64', Infinity],
      ['FP32', NaN],
    ]
    for (const [dt, v] of bad) {
      expectCohort(() => jsonToTensor('in', dt, [2], [dt === 'BYTES' ? 'ok' : 0, v]), 'BAD_REQUEST', /input "in": element 1 must be/)
    }
    expectCohort(() => jsonToTensor('in', 'INT32', [2], [[1, 2], [3]]))
    expectCohort(() => jsonToTensor('in', 'FP32', [1], [1e39]), 'BAD_REQUEST', /within ±3\.4028234663852886e\+38 for FP32, got 1e\+39/)
  })

  it('keeps the largest values of each float type and what rounds to them', () => {
    expect(tensorToJson(jsonToTensor('f', 'FP32', [3], [3.4028234663852886e38, -3.4028234663852886e38, 3.4028235e38]))).toEqual([
      3.4028234663852886e38, -3.4028234663852886e38, 3.4028234663852886e38,
    ])
    expect(tensorToJson(jsonToTensor('h', 'FP16', [2], [65504, -65519]))).toEqual([65504, -65504])
    expect(tensorToJson(jsonToTensor('u', 'FP32', [1], [1e-50]))).toEqual([0]) // underflow rounds to 0
  })

  it('rejects bad shapes, datatypes and deep nesting', () => {
    expectCohort(() => jsonToTensor('x', 'FP32', [-1], []), 'BAD_REQUEST', /input "x": shape/)
    expectCohort(() => jsonToTensor('x', 'FP32', [1.5], []))
    expectCohort(() => jsonToTensor('x', 'FP32', 'x' as unknown as number[], []))
    expectCohort(() => jsonToTensor('x', 'FP32', [2 ** 31, 2], []))
    expectCohort(() => jsonToTensor('x', 'FLOAT' as Datatype, [1], [1]), 'BAD_REQUEST', /unknown datatype/)
    let deep: unknown = [1]
    for (let i = 0; i < 100; i++) deep = [deep]
    expectCohort(() => jsonToTensor('x', 'FP32', [1], deep), 'BAD_REQUEST', /nested/)
  })
})

describe('rows', () => {
  const fixed = jsonToTensor('x', 'INT16', [4, 2], [1, 2, 3, 4, 5, 6, 7, 8])
  const strs = jsonToTensor('s', 'BYTES', [3, 2], ['a', '', 'ccc', 'é', '日本', 'z'])

  it('slices rows without copying', () => {
    const s = sliceRows(fixed, 1, 2)
    expect(s.shape).toEqual([2, 2])
    expect(tensorToJson(s)).toEqual([3, 4, 5, 6])
    expect(s.bytes.buffer).toBe(fixed.bytes.buffer)
    expect(tensorToJson(sliceRows(fixed, 4, 0))).toEqual([])
    const b = sliceRows(strs, 1, 2)
    expect(b.shape).toEqual([2, 2])
    expect(tensorToJson(b)).toEqual(['ccc', 'é', '日本', 'z'])
    expect(b.bytes.buffer).toBe(strs.bytes.buffer)
    expect(tensorToJson(sliceRows(strs, 0, 1))).toEqual(['a', ''])
    for (const [a, n] of [
      [-1, 1],
      [3, 2],
      [0, 5],
      [0.5, 1],
      [0, -1],
    ] as const)
      expectCohort(() => sliceRows(fixed, a, n))
    expectCohort(() => sliceRows({ datatype: 'FP32', shape: [], bytes: new Uint8Array(4) }, 0, 1))
    expectCohort(() => sliceRows({ datatype: 'FP32', shape: [2], bytes: new Uint8Array(4) }, 0, 1))
  })

  it('concatenates rows', () => {
    const parts = [sliceRows(fixed, 0, 1), sliceRows(fixed, 1, 0), sliceRows(fixed, 1, 3)]
    const c = concatRows(parts)
    expect(c.shape).toEqual([4, 2])
    expect([...c.bytes]).toEqual([...fixed.bytes])
    const cs = concatRows([sliceRows(strs, 0, 2), sliceRows(strs, 2, 1)])
    expect(tensorToJson(cs)).toEqual(tensorToJson(strs))
    expect(concatRows([fixed])).toBe(fixed)
    expectCohort(() => concatRows([]))
    expectCohort(() => concatRows([fixed, jsonToTensor('x', 'INT32', [1, 2], [1, 2])]), 'INVALID_INPUT')
    expectCohort(() => concatRows([fixed, jsonToTensor('x', 'INT16', [1, 3], [1, 2, 3])]), 'INVALID_INPUT')
    expectCohort(() => concatRows([fixed, jsonToTensor('x', 'INT16', [1, 2, 1], [1, 2])]), 'INVALID_INPUT')
  })

  it("rows adjacent in one buffer (one request's rows of a batch output) come back as a view, not a copy; others are copied once", () => {
    const before = wireCounts.copies
    const view = concatRows([sliceRows(fixed, 1, 1), sliceRows(fixed, 2, 2)])
    expect(view.shape).toEqual([3, 2])
    expect(view.bytes.buffer).toBe(fixed.bytes.buffer)
    expect([...view.bytes]).toEqual([...sliceRows(fixed, 1, 3).bytes])
    expect(wireCounts.copies).toBe(before)
    const apart = concatRows([sliceRows(fixed, 0, 1), sliceRows(fixed, 2, 1)])
    expect(apart.bytes.buffer).not.toBe(fixed.bytes.buffer)
    expect([...apart.bytes]).toEqual([...sliceRows(fixed, 0, 1).bytes, ...sliceRows(fixed, 2, 1).bytes])
    expect(wireCounts.copies).toBe(before + 1)
  })

  it('splits rows', () => {
    const parts = splitRows(strs, [1, 0, 2])
    expect(parts.map((p) => p.shape)).toEqual([
      [1, 2],
      [0, 2],
      [2, 2],
    ])
    expect(parts.map(tensorToJson)).toEqual([['a', ''], [], ['ccc', 'é', '日本', 'z']])
    expect(tensorToJson(concatRows(parts))).toEqual(tensorToJson(strs))
    const f = splitRows(fixed, [3, 1])
    expect(f.map(tensorToJson)).toEqual([
      [1, 2, 3, 4, 5, 6],
      [7, 8],
    ])
    expect(f[1]!.bytes.buffer).toBe(fixed.bytes.buffer)
    expect(splitRows(fixed, [4])[0]!.shape).toEqual([4, 2])
    expectCohort(() => splitRows(fixed, [1, 2]))
    expectCohort(() => splitRows(fixed, [5, -1]))
    expectCohort(() => splitRows(fixed, [1.5, 2.5]))
    expectCohort(() => splitRows({ ...strs, bytes: new Uint8Array([...strs.bytes, 9]) }, [3]), 'BAD_REQUEST', /trailing/)
    expectCohort(() => splitRows({ ...strs, bytes: strs.bytes.subarray(0, 10) }, [3]))
  })

  it('groups by names, datatypes and row shapes', () => {
    const t = (dt: Datatype, shape: number[]): WireTensor => ({ datatype: dt, shape, bytes: new Uint8Array(0) })
    const k = groupKeyOf({ a: t('FP32', [1, 3]), b: t('INT64', [1]) })
    expect(groupKeyOf({ b: t('INT64', [5]), a: t('FP32', [5, 3]) })).toBe(k)
    expect(groupKeyOf({ a: t('FP32', [1, 4]), b: t('INT64', [1]) })).not.toBe(k)
    expect(groupKeyOf({ a: t('FP16', [1, 3]), b: t('INT64', [1]) })).not.toBe(k)
    expect(groupKeyOf({ a: t('FP32', [1, 3]), c: t('INT64', [1]) })).not.toBe(k)
    expect(groupKeyOf({ a: t('FP32', [1, 3]) })).not.toBe(k)
    expect(groupKeyOf({ a: t('FP32', [1, 3, 1]), b: t('INT64', [1]) })).not.toBe(k)
    expect(groupKeyOf({ 'a":FP32[3];"b': t('INT64', [1]) })).not.toBe(groupKeyOf({ a: t('FP32', [1, 3]), b: t('INT64', [1]) }))
    expect(rowShape(t('FP32', [7, 2, 3]))).toEqual([2, 3])
  })
})
