import { decodeValue, encodeValue } from '@cohort/protocol'
import { ItemError } from '@cohort/predictor'
import { describe, expect, it } from 'vitest'
import { decodeBatch, decodeStagePart, decodeStageResults, encodeBatch, encodeStagePart, encodeStageResults, type WireBatch, type WireColumn } from './wire-batch.ts'
import type { ItemTensor } from './types.ts'

/** Through msgpack bytes, as between processes. */
const viaBus = (w: unknown): unknown => decodeValue(encodeValue(w).slice())

const t = (data: Float32Array | BigInt64Array | Int32Array, shape: number[], datatype: ItemTensor['datatype'] = 'FP32'): ItemTensor => ({ datatype, shape, data })

describe('stage batches on the wire (columnar)', () => {
  it('a tensor field of one shape is one typed array for the batch; items come back as views of one buffer', () => {
    const items = Array.from({ length: 50 }, (_, i) => ({ input: t(Float32Array.of(i, i + 0.5, -i), [3]) as ItemTensor & { data: Float32Array }, id: i, tag: `r${i}` }))
    const w = encodeBatch(items) as Extract<WireBatch, { cols: unknown }>
    expect(Object.keys(w.cols)).toEqual(['input', 'id', 'tag'])
    expect(w.cols['input']).toMatchObject({ k: 't', dt: 'FP32', ta: 'Float32Array', shape: [3] })
    expect((w.cols['input'] as { b: Uint8Array }).b.byteLength).toBe(50 * 3 * 4)
    expect(w.cols['id']!.k).toBe('j')
    const back = decodeBatch(viaBus(w)) as typeof items
    expect(back.map((x) => ({ ...x, input: { ...x.input, data: [...x.input.data] } }))).toEqual(items.map((x) => ({ ...x, input: { ...x.input, data: [...x.input.data] } })))
    expect(back[0]!.input.data).toBeInstanceOf(Float32Array)
    // One allocation for the column, every item a view into it (no per-item copy).
    expect(new Set(back.map((x) => x.input.data.buffer)).size).toBe(1)
  })

  it('ragged tensors travel with row offsets and per-item shapes; plain typed arrays with offsets', () => {
    const items = [
      { ids: t(BigInt64Array.of(1n, 2n), [2], 'INT64'), mask: Int32Array.of(1, 1) },
      { ids: t(BigInt64Array.of(3n, 4n, 5n, 6n), [2, 2], 'INT64'), mask: Int32Array.of(1, 1, 1, 0) },
      { ids: t(new BigInt64Array(0), [0], 'INT64'), mask: new Int32Array(0) },
    ] as { ids: ItemTensor & { data: BigInt64Array }; mask: Int32Array }[]
    const w = encodeBatch(items) as Extract<WireBatch, { cols: unknown }>
    expect(w.cols['ids']).toMatchObject({ k: 'r', off: [0, 2, 6, 6], shapes: [[2], [2, 2], [0]] })
    expect(w.cols['mask']).toMatchObject({ k: 'a', ta: 'Int32Array', off: [0, 2, 6, 6] })
    const back = decodeBatch(viaBus(w)) as typeof items
    expect(back.map((x) => [x.ids.shape, [...x.ids.data], [...x.mask]])).toEqual(items.map((x) => [x.ids.shape, [...x.ids.data], [...x.mask]]))
    expect(back[1]!.ids.data).toBeInstanceOf(BigInt64Array)
  })

  it('nested records of one key set are nested columns (a record of tensors beside other fields)', () => {
    const items = [2, 3].map((k) => ({ tensors: { ids: t(Int32Array.of(k, k), [2], 'INT32'), mask: t(Int32Array.of(1, 0), [2], 'INT32') }, top_k: k }))
    const w = encodeBatch(items) as Extract<WireBatch, { cols: unknown }>
    const nested = w.cols['tensors'] as Extract<WireColumn, { k: 'o' }>
    expect(nested.k).toBe('o')
    expect(nested.cols['ids']!.k).toBe('t')
    const back = decodeBatch(viaBus(w)) as typeof items
    expect(back.map((x) => [[...(x.tensors.ids.data as Int32Array)], x.tensors.mask.shape, x.top_k])).toEqual([
      [[2, 2], [2], 2],
      [[3, 3], [2], 3],
    ])
  })

  it('values that are not records of one key set travel as rows (typed arrays kept)', () => {
    for (const items of [
      [1, 'two', null],
      [{ a: 1 }, { b: 2 }],
      [{ a: Float64Array.of(1) }, 3],
      [
        { a: 1, b: undefined },
        { a: 2, b: 3 },
      ],
    ]) {
      const w = encodeBatch(items)
      expect('rows' in w).toBe(true)
      expect(decodeBatch(viaBus(w))).toEqual(items)
    }
    // An undefined field stays absent, as msgpack (and JSON) leave it out of a map.
    expect(Object.keys(decodeBatch(viaBus(encodeBatch([{ a: 1, b: undefined }])))[0] as object)).toEqual(['a'])
    expect(decodeBatch(viaBus(encodeBatch([])))).toEqual([])
  })

  it('malformed batches are refused with a clear error, never a crash', () => {
    const good = viaBus(encodeBatch([{ x: t(Float32Array.of(1, 2), [2]) }, { x: t(Float32Array.of(3), [1]) }])) as { n: number; cols: { x: Record<string, unknown> } }
    const cases: [unknown, RegExp][] = [
      [null, /must be a map/],
      [{ n: -1, rows: [] }, /non-negative/],
      [{ n: 2, rows: [1] }, /2 rows expected/],
      [{ n: 2, cols: { x: { ...good.cols.x, off: [0, 1, 2] } } }, /row offsets/],
      [{ n: 2, cols: { x: { ...good.cols.x, off: [0, 2, 1] } } }, /row offsets/],
      [{ n: 2, cols: { x: { ...good.cols.x, shapes: [[2], [2]] } } }, /does not match/],
      [{ n: 1, cols: { x: { k: 't', dt: 'FP32', ta: 'Float32Array', shape: [3], b: new Uint8Array(8) } } }, /needs 3 elements/],
      [{ n: 1, cols: { x: { k: 't', dt: 'FP32', ta: 'Float32Array', shape: [1], b: new Uint8Array(3) } } }, /whole number/],
      [{ n: 1, cols: { x: { k: 't', dt: 'FP32', ta: 'Nope', shape: [1], b: new Uint8Array(4) } } }, /unknown typed array/],
      [{ n: 1, cols: { x: { k: 'z' } } }, /unknown column kind/],
      [{ n: 1, cols: JSON.parse('{"__proto__": {"k": "j", "v": [1]}}') }, /__proto__/],
    ]
    for (const [w, re] of cases) {
      expect(() => decodeBatch(w)).toThrow(re)
    }
  })

  it('a stage part carries one deadline for all items, or one each (0 on the wire = none)', () => {
    const items = [{ v: 1 }, { v: 2 }]
    const one = encodeStagePart(items, [5000, 5000])
    expect(one.d).toBe(5000)
    expect(decodeStagePart(viaBus(one))).toEqual({ items, deadlines: [5000, 5000] })
    const each = encodeStagePart(items, [Infinity, 7000])
    expect(each.d).toEqual([0, 7000])
    expect(decodeStagePart(viaBus(each)).deadlines).toEqual([Infinity, 7000])
    expect(() => decodeStagePart({ d: [1], b: encodeBatch(items) })).toThrow(/2 deadlines/)
  })

  it('stage results keep item errors (with their codes) in place, the rest columnar', () => {
    const rs = [{ y: 1 }, new ItemError('bad row', 'INVALID_INPUT'), { y: 3 }, new Error('boom')]
    const back = decodeStageResults(viaBus(encodeStageResults(rs)), 4)
    expect(back[0]).toEqual({ y: 1 })
    expect(back[2]).toEqual({ y: 3 })
    expect(back[1]).toBeInstanceOf(ItemError)
    expect((back[1] as ItemError).code).toBe('INVALID_INPUT')
    expect((back[3] as ItemError).code).toBe('PREDICTOR_FAILED')
    expect(() => decodeStageResults(viaBus(encodeStageResults(rs)), 5)).toThrow(/5 results expected/)
    expect(() => decodeStageResults({ b: encodeBatch([1]), e: [{ i: 7, code: 'X', message: '' }] }, 2)).toThrow(/not there/)
  })
})
