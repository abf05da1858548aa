import { describe, expect, it } from 'vitest'
import { CohortError, jsonToTensor, tensorToJson, type WireTensor } from '@cohort/protocol'
import {
  DEFAULT_MAX_BATCH_SIZE,
  DEFAULT_MAX_DELAY_MS,
  ItemError,
  Type,
  definePredictor,
  isPredictor,
  itemError,
  schemaToTensorMeta,
  tensorsToItems,
  itemsToTensors,
  validateItem,
  type PredictContext,
  type PredictorDefinition,
} from './index.ts'

const ctx = (batchSize: number): PredictContext => ({ batchSize, signal: new AbortController().signal })

/** Tensors as plain `{datatype, shape, data}` for deep equality. */
function plain(ts: Record<string, WireTensor>): Record<string, { datatype: string; shape: number[]; data: unknown[] }> {
  return Object.fromEntries(Object.entries(ts).map(([k, t]) => [k, { datatype: t.datatype, shape: t.shape, data: tensorToJson(t) }]))
}

/** Catch what `fn` throws (fails the test when nothing is thrown). */
function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (e) {
    return e
  }
  throw new Error('expected a throw')
}

describe('definePredictor', () => {
  const input = Type.Object({ a: Type.Number(), b: Type.Number({ default: 0 }) })

  it('keeps the batch form: one call per batch, results in order, Error results kept in place', async () => {
    const calls: number[][] = []
    const p = definePredictor({
      name: 'sum',
      description: 'adds',
      input,
      batch: { maxBatchSize: 8, maxDelayMs: 2 },
      predict: (xs, c) => {
        calls.push(xs.map((x) => x.a))
        expect(c.batchSize).toBe(xs.length)
        return xs.map((x) => (x.a < 0 ? itemError(`negative a=${x.a}`, 'INVALID_INPUT') : x.a + x.b))
      },
    })
    expect(isPredictor(p)).toBe(true)
    expect(p.name).toBe('sum')
    expect(p.description).toBe('adds')
    expect(p.input).toBe(input)
    expect(p.output).toBeUndefined()
    expect(p.batch).toEqual({ maxBatchSize: 8, maxDelayMs: 2 })
    const out = await p.predictBatch(
      [
        { a: 1, b: 2 },
        { a: -1, b: 0 },
        { a: 10, b: 5 },
      ],
      ctx(3),
    )
    expect(calls).toEqual([[1, -1, 10]])
    expect(out[0]).toBe(3)
    expect(out[1]).toBeInstanceOf(ItemError)
    expect(out[1]).toMatchObject({ message: 'negative a=-1', code: 'INVALID_INPUT' })
    expect(out[2]).toBe(15)
  })

  it('applies batching defaults', () => {
    const p = definePredictor({ name: 'd', input, predict: (xs) => xs.map(() => 0) })
    expect(p.batch).toEqual({ maxBatchSize: DEFAULT_MAX_BATCH_SIZE, maxDelayMs: DEFAULT_MAX_DELAY_MS })
    expect(DEFAULT_MAX_BATCH_SIZE).toBe(32)
    expect(DEFAULT_MAX_DELAY_MS).toBe(5)
  })

  it('runs the single form once per item (a batch of one), a throw failing that item alone', async () => {
    const seen: unknown[] = []
    const p = definePredictor({
      name: 'one',
      single: true,
      input,
      batch: { maxBatchSize: 16 },
      predict: (x, c) => {
        seen.push(x)
        expect(c.batchSize).toBe(3)
        if (x.a === 2) {
          throw new RangeError('two is bad')
        }
        if (x.a === 3) {
          const notAnError: unknown = 'not an error object' // the case under test: a throw of a non-Error
          throw notAnError
        }
        return { doubled: x.a * 2 }
      },
    })
    // The single form is always served one item per batch, whatever was asked.
    expect(p.batch.maxBatchSize).toBe(1)
    const out = await p.predictBatch(
      [
        { a: 1, b: 0 },
        { a: 2, b: 0 },
        { a: 3, b: 0 },
      ],
      ctx(3),
    )
    expect(seen).toHaveLength(3)
    expect(out[0]).toEqual({ doubled: 2 })
    expect(out[1]).toBeInstanceOf(RangeError)
    expect((out[1] as Error).message).toBe('two is bad')
    expect(out[2]).toBeInstanceOf(Error)
    expect((out[2] as Error).message).toBe('not an error object')
  })

  it('validates name, predict and maxBatchSize', () => {
    const predict = (xs: unknown[]) => xs
    expect(() => definePredictor({ name: '', input, predict })).toThrow(TypeError)
    expect(() => definePredictor({ name: '', input, predict })).toThrow(/name is required/)
    expect(() => definePredictor({ input, predict } as unknown as PredictorDefinition)).toThrow(TypeError)
    expect(() => definePredictor({ name: 'x', input } as unknown as PredictorDefinition)).toThrow(/x\): predict must be a function/)
    expect(() => definePredictor({ name: 'x', input, predict: 5 } as unknown as PredictorDefinition)).toThrow(TypeError)
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => definePredictor({ name: 'x', input, predict, batch: { maxBatchSize: bad } }), String(bad)).toThrow(RangeError)
    }
    expect(definePredictor({ name: 'x', input, predict, batch: { maxBatchSize: 1 } }).batch.maxBatchSize).toBe(1)
  })

  it('throws when the batch form returns the wrong number of results (or no array)', async () => {
    const short = definePredictor({ name: 'short', input, predict: (xs) => xs.slice(1).map(() => 1) })
    await expect(
      short.predictBatch(
        [
          { a: 1, b: 0 },
          { a: 2, b: 0 },
        ],
        ctx(2),
      ),
    ).rejects.toThrow('predictor short returned 1 results for 2 inputs')
    const long = definePredictor({ name: 'long', input, predict: (xs) => [...xs, ...xs] })
    await expect(long.predictBatch([{ a: 1, b: 0 }], ctx(1))).rejects.toThrow(/returned 2 results for 1 inputs/)
    const notArray = definePredictor({ name: 'obj', input, predict: () => ({}) as unknown as number[] })
    await expect(notArray.predictBatch([{ a: 1, b: 0 }], ctx(1))).rejects.toThrow(/returned object results for 1 inputs/)
    const thrower = definePredictor({
      name: 't',
      input,
      predict: () => {
        throw new Error('boom')
      },
    })
    await expect(thrower.predictBatch([{ a: 1, b: 0 }], ctx(1))).rejects.toThrow('boom')
  })

  it('runs setup and teardown (optional) with the setup context', async () => {
    const log: string[] = []
    const p = definePredictor({
      name: 'life',
      input,
      setup: (c) => {
        log.push(`setup ${c.name} ${c.signal.aborted}`)
      },
      teardown: () => {
        log.push('teardown')
      },
      predict: (xs) => xs.map(() => 0),
    })
    await p.setup({ name: 'life', signal: new AbortController().signal })
    await p.teardown()
    expect(log).toEqual(['setup life false', 'teardown'])
    const bare = definePredictor({ name: 'bare', input, predict: (xs) => xs.map(() => 0) })
    await expect(bare.setup({ name: 'bare', signal: new AbortController().signal })).resolves.toBeUndefined()
    await expect(bare.teardown()).resolves.toBeUndefined()
  })

  it('isPredictor only accepts branded values', () => {
    expect(isPredictor(null)).toBe(false)
    expect(isPredictor({ name: 'x', predictBatch: () => [] })).toBe(false)
    expect(isPredictor('x')).toBe(false)
  })
})

describe('itemError', () => {
  it('is an Error with a code, PREDICTOR_FAILED by default', () => {
    const e = itemError('bad x')
    expect(e).toBeInstanceOf(ItemError)
    expect(e).toBeInstanceOf(Error)
    expect(e.name).toBe('ItemError')
    expect(e.message).toBe('bad x')
    expect(e.code).toBe('PREDICTOR_FAILED')
    expect(itemError('nope', 'INVALID_INPUT').code).toBe('INVALID_INPUT')
    expect(new ItemError('m', 'DEADLINE_EXCEEDED').code).toBe('DEADLINE_EXCEEDED')
  })
})

describe('validateItem', () => {
  const schema = Type.Object({
    text: Type.String(),
    times: Type.Integer({ default: 1, minimum: 1 }),
    opts: Type.Object({ upper: Type.Boolean({ default: false }), scale: Type.Number() }),
  })

  it('applies defaults (also nested) without mutating the caller item', () => {
    const item = { text: 'hi', opts: { scale: 2 } }
    const out: { text: string; times: number; opts: { upper: boolean; scale: number } } = validateItem(schema, item)
    expect(out).toEqual({ text: 'hi', times: 1, opts: { upper: false, scale: 2 } })
    expect(item).toEqual({ text: 'hi', opts: { scale: 2 } })
    // Given values win over defaults.
    expect(validateItem(schema, { text: 'x', times: 3, opts: { upper: true, scale: 0 } })).toEqual({
      text: 'x',
      times: 3,
      opts: { upper: true, scale: 0 },
    })
  })

  it('throws INVALID_INPUT naming the item index and the first failing path', () => {
    const e = thrown(() => validateItem(schema, { text: 'x', opts: { scale: 'big' } }, 4))
    expect(e).toBeInstanceOf(CohortError)
    expect(e).toMatchObject({ code: 'INVALID_INPUT', status: 400 })
    expect((e as Error).message).toBe('item 4: /opts/scale: Expected number')
    const missing = thrown(() => validateItem(schema, { opts: { scale: 1 } }))
    expect((missing as Error).message).toBe('item 0: /text: Expected required property')
    const range = thrown(() => validateItem(schema, { text: 'x', times: 0, opts: { scale: 1 } }, 1))
    expect((range as Error).message).toMatch(/^item 1: \/times: .*1/)
    // Only the first failure is reported, even when several properties are wrong.
    const many = thrown(() => validateItem(schema, { text: 5, times: 'x', opts: {} }, 2)) as Error
    expect(many.message.match(/item 2: /g)).toHaveLength(1)
  })

  it('reports "/" when the item itself has the wrong type', () => {
    for (const bad of ['str', 5, null, [1]]) {
      const e = thrown(() => validateItem(schema, bad, 7)) as CohortError
      expect(e.code).toBe('INVALID_INPUT')
      expect(e.message).toBe('item 7: /: Expected object')
    }
  })
})

describe('tensorsToItems', () => {
  it('turns [N] tensors into scalars per item (numbers, integers, booleans, strings)', () => {
    const items = tensorsToItems(
      {
        x: jsonToTensor('x', 'FP64', [3], [0.5, -1, 2.25]),
        n: jsonToTensor('n', 'INT64', [3], [1, -2, 9007199254740991]),
        b: jsonToTensor('b', 'BOOL', [3], [true, false, true]),
        s: jsonToTensor('s', 'BYTES', [3], ['a', 'héllo', '']),
        f: jsonToTensor('f', 'FP32', [3], [0.5, 1.5, -2]),
      },
      3,
    )
    expect(items).toEqual([
      { x: 0.5, n: 1, b: true, s: 'a', f: 0.5 },
      { x: -1, n: -2, b: false, s: 'héllo', f: 1.5 },
      { x: 2.25, n: 9007199254740991, b: true, s: '', f: -2 },
    ])
  })

  it('turns [N, ...] tensors into nested arrays per item (row-major)', () => {
    const t = jsonToTensor('m', 'INT32', [2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    expect(tensorsToItems({ m: t }, 2)).toEqual([
      {
        m: [
          [1, 2, 3],
          [4, 5, 6],
        ],
      },
      {
        m: [
          [7, 8, 9],
          [10, 11, 12],
        ],
      },
    ])
    const v = jsonToTensor('v', 'BYTES', [2, 2], ['a', 'b', 'c', 'd'])
    expect(tensorsToItems({ v }, 2)).toEqual([{ v: ['a', 'b'] }, { v: ['c', 'd'] }])
  })

  it('gives empty items for a count of 0', () => {
    expect(tensorsToItems({ x: jsonToTensor('x', 'FP64', [0], []) }, 0)).toEqual([])
  })
})

describe('itemsToTensors', () => {
  it('maps object outputs to one tensor per property with inferred datatypes', () => {
    const out = plain(
      itemsToTensors([
        { y: 1.5, n: 1, ok: true, label: 'cat', vec: [1, 2] },
        { y: 2, n: 2, ok: false, label: 'dog', vec: [3, 4] },
      ]),
    )
    expect(out).toEqual({
      y: { datatype: 'FP64', shape: [2], data: [1.5, 2] },
      n: { datatype: 'INT64', shape: [2], data: [1, 2] },
      ok: { datatype: 'BOOL', shape: [2], data: [true, false] },
      label: { datatype: 'BYTES', shape: [2], data: ['cat', 'dog'] },
      vec: { datatype: 'INT64', shape: [2, 2], data: [1, 2, 3, 4] },
    })
  })

  it('maps non-object outputs to one tensor named "output"', () => {
    expect(plain(itemsToTensors([1, 2, 3]))).toEqual({ output: { datatype: 'INT64', shape: [3], data: [1, 2, 3] } })
    expect(plain(itemsToTensors(['a', 'b']))).toEqual({ output: { datatype: 'BYTES', shape: [2], data: ['a', 'b'] } })
    expect(plain(itemsToTensors([[[0.5]], [[1]]]))).toEqual({ output: { datatype: 'FP64', shape: [2, 1, 1], data: [0.5, 1] } })
  })

  it('uses the output schema to keep integral numbers FP64, and INT64 without a schema', () => {
    const integral = [{ y: 1 }, { y: 2 }]
    expect(itemsToTensors(integral)['y']!.datatype).toBe('INT64')
    expect(itemsToTensors(integral, Type.Object({ y: Type.Number() }))['y']!.datatype).toBe('FP64')
    expect(itemsToTensors(integral, Type.Object({ y: Type.Integer() }))['y']!.datatype).toBe('INT64')
    // A non-integer value makes the column FP64 even when the schema says integer.
    expect(itemsToTensors([{ y: 1 }, { y: 2.5 }], Type.Object({ y: Type.Integer() }))['y']!.datatype).toBe('FP64')
    // Schema of a non-object output applies to the "output" tensor.
    expect(itemsToTensors([1, 2], Type.Number())['output']!.datatype).toBe('FP64')
    expect(itemsToTensors([[1, 2]], Type.Array(Type.Number()))['output']).toMatchObject({ datatype: 'FP64', shape: [1, 2] })
  })

  it('falls back to JSON text (BYTES, shape [N]) for values that are not rectangular or not uniform', () => {
    expect(plain(itemsToTensors([{ a: [1, 2] }, { a: [3] }]))).toEqual({
      a: { datatype: 'BYTES', shape: [2], data: ['[1,2]', '[3]'] },
    })
    expect(plain(itemsToTensors([{ a: 'x' }, { a: 1 }]))).toEqual({ a: { datatype: 'BYTES', shape: [2], data: ['"x"', '1'] } })
    expect(plain(itemsToTensors([{ a: true }, { a: 1 }]))).toEqual({ a: { datatype: 'BYTES', shape: [2], data: ['true', '1'] } })
    expect(plain(itemsToTensors([{ o: { k: 1 } }]))).toEqual({ o: { datatype: 'BYTES', shape: [1], data: ['{"k":1}'] } })
    expect(plain(itemsToTensors([null, 1]))).toEqual({ output: { datatype: 'BYTES', shape: [2], data: ['null', '1'] } })
    // Objects mixed with non-objects: each whole output as JSON text.
    expect(plain(itemsToTensors([{ a: 1 }, 2]))).toEqual({ output: { datatype: 'BYTES', shape: [2], data: ['{"a":1}', '2'] } })
  })

  it('takes the union of keys: a key missing in some items travels as JSON text with null there', () => {
    const t = itemsToTensors([{ s: 1, extra: 1 }, { s: 2 }])
    expect(tensorToJson(t['s']!)).toEqual([1, 2])
    expect(t['extra']!.datatype).toBe('BYTES')
    expect(tensorToJson(t['extra']!)).toEqual(['1', 'null'])
  })

  it('keeps integral numbers beyond 2^53 as FP64 instead of failing', () => {
    const t = itemsToTensors([{ s: 1e20 }, { s: 3 }])
    expect(t['s']!.datatype).toBe('FP64')
    expect(tensorToJson(t['s']!)).toEqual([1e20, 3])
  })

  it('gives an empty BYTES output for no outputs', () => {
    expect(plain(itemsToTensors([]))).toEqual({ output: { datatype: 'BYTES', shape: [0], data: [] } })
  })

  it('round-trips rectangular items through tensorsToItems', () => {
    const cases: Record<string, unknown>[][] = [
      [{ x: 1.25 }, { x: -3.5 }],
      [{ n: 4 }, { n: -7 }, { n: 0 }],
      [{ s: 'α' }, { s: '' }],
      [{ b: false }, { b: true }],
      [
        {
          m: [
            [1.5, 2],
            [3, 4],
          ],
        },
        {
          m: [
            [5, 6],
            [7, 8.25],
          ],
        },
      ],
      [{ x: 0.5, words: ['a', 'b', 'c'], flags: [true, false, true], ids: [1, 2, 3] }],
    ]
    for (const items of cases) {
      const ts = itemsToTensors(items)
      expect(tensorsToItems(ts, items.length), JSON.stringify(items)).toEqual(items)
    }
  })
})

describe('schemaToTensorMeta', () => {
  it('describes each property of an object schema as a batch-major column', () => {
    const s = Type.Object({
      x: Type.Number(),
      n: Type.Integer(),
      flag: Type.Boolean(),
      text: Type.String(),
      vec: Type.Array(Type.Number()),
      grid: Type.Array(Type.Array(Type.Integer())),
      maybe: Type.Optional(Type.Number()),
      either: Type.Union([Type.String(), Type.Number()]),
    })
    expect(schemaToTensorMeta(s, 'input')).toEqual([
      { name: 'x', datatype: 'FP64', shape: [-1] },
      { name: 'n', datatype: 'INT64', shape: [-1] },
      { name: 'flag', datatype: 'BOOL', shape: [-1] },
      { name: 'text', datatype: 'BYTES', shape: [-1] },
      { name: 'vec', datatype: 'FP64', shape: [-1, -1] },
      { name: 'grid', datatype: 'INT64', shape: [-1, -1, -1] },
      { name: 'maybe', datatype: 'FP64', shape: [-1] },
      { name: 'either', datatype: 'BYTES', shape: [-1] },
    ])
  })

  it('uses the fallback name for non-object schemas and BYTES when there is no schema', () => {
    expect(schemaToTensorMeta(undefined, 'output')).toEqual([{ name: 'output', datatype: 'BYTES', shape: [-1] }])
    expect(schemaToTensorMeta(Type.Number(), 'output')).toEqual([{ name: 'output', datatype: 'FP64', shape: [-1] }])
    expect(schemaToTensorMeta(Type.Array(Type.Boolean()), 'y')).toEqual([{ name: 'y', datatype: 'BOOL', shape: [-1, -1] }])
    expect(schemaToTensorMeta(Type.String(), 'input')).toEqual([{ name: 'input', datatype: 'BYTES', shape: [-1] }])
  })

  it('agrees with itemsToTensors on the datatype and rank of declared outputs', () => {
    const schema = Type.Object({ y: Type.Number(), n: Type.Integer(), vec: Type.Array(Type.Number()), ok: Type.Boolean() })
    const meta = schemaToTensorMeta(schema, 'output')
    const ts = itemsToTensors([{ y: 1, n: 2, vec: [1, 2], ok: true }], schema)
    for (const m of meta) {
      const t = ts[m.name]!
      expect(t.datatype, m.name).toBe(m.datatype)
      expect(t.shape.length, m.name).toBe(m.shape.length)
    }
  })
})
