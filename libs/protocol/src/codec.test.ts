import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decodeCancel, decodeReply, decodeRequest, decodeValue, encodeCancel, encodeReply, encodeRequest, encodeValue, requestItemCount } from './codec.ts'
import { DATATYPES } from './datatypes.ts'
import type { InferReply, InferRequest, ModelMeta } from './envelope.ts'
import { CohortError } from './errors.ts'
import { encodeBytesElements, jsonToTensor, tensorToJson } from './tensor-data.ts'

function expectBad(fn: () => unknown, msg?: RegExp): void {
  try {
    fn()
  } catch (e) {
    expect(e).toBeInstanceOf(CohortError)
    expect((e as CohortError).code).toBe('BAD_REQUEST')
    if (msg) expect((e as CohortError).message).toMatch(msg)
    return
  }
  throw new Error('expected CohortError BAD_REQUEST')
}

const x = jsonToTensor('x', 'FP32', [2, 2], [1, 2, 3, 4])
const s = jsonToTensor('s', 'BYTES', [2], ['a', 'bé'])
const base: InferRequest = { v: 1, id: 'r1', model: 'm', deadline: 1_700_000_000_000, tensors: { x, s } }
/** Encode a raw (possibly invalid) envelope, bypassing the types. */
const raw = (o: Record<string, unknown>): Uint8Array => encodeValue(o)
const req = (patch: Record<string, unknown>) => raw({ ...base, ...patch })

describe('request', () => {
  it('round-trips tensors and optional fields', () => {
    const r: InferRequest = { ...base, traceparent: '00-abc-def-01', tracestate: 'k=v', priority: 2, outputs: ['y'] }
    const back = decodeRequest(encodeRequest(r))
    expect(back).toMatchObject({ v: 1, id: 'r1', model: 'm', deadline: base.deadline, traceparent: '00-abc-def-01', tracestate: 'k=v', priority: 2, outputs: ['y'] })
    expect(tensorToJson(back.tensors!.x!)).toEqual([1, 2, 3, 4])
    expect(tensorToJson(back.tensors!.s!)).toEqual(['a', 'bé'])
    expect(back.tensors!.x!.bytes).toBeInstanceOf(Uint8Array)
    expect(requestItemCount(back)).toBe(2)
  })

  it('round-trips items and omits undefined fields', () => {
    const r: InferRequest = { v: 1, id: 'r2', model: 'm', deadline: 5, items: [{ a: 1 }, 'two', null, [3]], traceparent: undefined }
    const buf = encodeRequest(r)
    expect(Object.keys(decodeValue(buf) as object)).not.toContain('traceparent')
    const back = decodeRequest(buf)
    expect(back.items).toEqual([{ a: 1 }, 'two', null, [3]])
    expect('traceparent' in back).toBe(false)
    expect(requestItemCount(back)).toBe(4)
  })

  it('accepts 64-bit integer fields from other encoders', () => {
    const back = decodeRequest(req({ deadline: 1_700_000_000_123n, priority: 3n }))
    expect(back.deadline).toBe(1_700_000_000_123)
    expect(back.priority).toBe(3)
  })

  it('accepts a plain Uint8Array (not a Buffer) at an odd offset', () => {
    const enc = encodeRequest(base)
    const buf = new Uint8Array(enc.length + 3)
    buf.set(enc, 3)
    const back = decodeRequest(buf.subarray(3))
    expect(tensorToJson(back.tensors!.x!)).toEqual([1, 2, 3, 4])
  })

  it('rejects unreadable bytes', () => {
    const good = encodeRequest(base)
    expectBad(() => decodeRequest(new Uint8Array(0)), /not valid msgpack/)
    expectBad(() => decodeRequest(new Uint8Array([0xc1])))
    expectBad(() => decodeRequest(new TextEncoder().encode('{"v":1}')))
    expectBad(() => decodeRequest(good.subarray(0, good.length - 1)), /not valid msgpack/)
    expectBad(() => decodeRequest(new Uint8Array([...good, 0])), /not valid msgpack/)
    expectBad(() => decodeRequest(new Uint8Array([0xd4, 0x70, 0x00]))) // structured-clone pointer
    expectBad(() => decodeRequest('x' as unknown as Uint8Array))
    expect(decodeRequest(good).id).toBe('r1') // decoder state is fine after errors
  })

  it('rejects wrong envelope fields', () => {
    const cases: [unknown, RegExp][] = [
      [raw({}), /\.v must be 1/],
      [encodeValue([1, 2]), /must be a msgpack map/],
      [encodeValue('str'), /must be a msgpack map/],
      [encodeValue(null), /must be a msgpack map/],
      [encodeValue(new Uint8Array(3)), /must be a msgpack map/],
      [req({ v: 2 }), /\.v must be 1/],
      [req({ v: '1' }), /\.v must be 1/],
      [req({ id: 5 }), /\.id must be a string/],
      [req({ id: undefined }), /\.id must be a string/],
      [req({ model: null }), /\.model must be a string/],
      [req({ deadline: '1' }), /deadline must be a finite number/],
      [req({ deadline: NaN }), /deadline/],
      [req({ deadline: Infinity }), /deadline/],
      [req({ deadline: 2n ** 60n }), /deadline/],
      [req({ deadline: undefined }), /deadline/],
      [req({ traceparent: 1 }), /traceparent must be a string/],
      [req({ tracestate: 2 }), /tracestate must be a string/],
      [req({ priority: 'high' }), /priority must be a finite number/],
      [req({ outputs: ['a', 1] }), /outputs must be an array of strings/],
      [req({ outputs: 'a' }), /outputs/],
      [req({ items: 'abc', tensors: undefined }), /items must be an array/],
      [req({ items: { 0: 1 }, tensors: undefined }), /items must be an array/],
      [req({ items: [1] }), /both tensors and items/],
      [req({ tensors: undefined }), /neither tensors nor items/],
      [req({ tensors: {} }), /tensors is empty/],
      [req({ tensors: [x] }), /tensors must be a map/],
      [req({ tensors: { x: 'no' } }), /must be a map \{datatype, shape, bytes\}/],
    ]
    for (const [buf, msg] of cases) expectBad(() => decodeRequest(buf as Uint8Array), msg)
  })

  it('rejects bad tensors', () => {
    const t = (o: Record<string, unknown>) => req({ tensors: { x: { ...x, ...o } } })
    const cases: [Uint8Array, RegExp][] = [
      [t({ datatype: 'FP8' }), /unknown datatype "FP8"/],
      [t({ datatype: 3 }), /unknown datatype/],
      [t({ datatype: undefined }), /unknown datatype/],
      [t({ shape: [-2, 2] }), /non-negative integers/],
      [t({ shape: [2, 1.5] }), /non-negative integers/],
      [t({ shape: ['2', 2] }), /non-negative integers/],
      [t({ shape: 4 }), /shape must be an array/],
      [t({ shape: [65536, 65536] }), /more than 2\^31/],
      [t({ shape: Array(17).fill(1) }), /rank 17/],
      [t({ shape: [] }), /needs 4 bytes|batch-major/],
      [t({ shape: [1, 2] }), /needs 8 bytes, got 16/],
      [t({ bytes: [1, 2, 3] }), /bytes must be binary/],
      [t({ bytes: 'abcd' }), /bytes must be binary/],
      [t({ bytes: new Uint8Array(15) }), /needs 16 bytes, got 15/],
      [req({ tensors: { x: { datatype: 'FP32', shape: [], bytes: new Uint8Array(4) } } }), /batch-major/],
      [req({ tensors: { x, y: jsonToTensor('y', 'INT8', [3], [1, 2, 3]) } }), /shape\[0\] must agree/],
      [req({ tensors: { s: { ...s, bytes: s.bytes.subarray(0, 8) } } }), /BYTES/],
      [req({ tensors: { s: { ...s, bytes: new Uint8Array([...s.bytes, 0]) } } }), /trailing/],
      [req({ tensors: { s: { ...s, shape: [3] } } }), /BYTES/],
      [req({ tensors: { s: { ...s, bytes: encodeBytesElements(['a', 'b', 'c']) } } }), /trailing/],
    ]
    for (const [buf, msg] of cases) expectBad(() => decodeRequest(buf), msg)
  })
})

describe('requestItemCount', () => {
  it('counts items or rows and rejects inconsistent requests', () => {
    expect(requestItemCount({ v: 1, id: 'a', model: 'm', deadline: 1, items: [] })).toBe(0)
    expect(requestItemCount({ ...base, tensors: { x: jsonToTensor('x', 'INT8', [0, 2], []) } })).toBe(0)
    expectBad(() => requestItemCount({ ...base, items: [1] }))
    expectBad(() => requestItemCount({ v: 1, id: 'a', model: 'm', deadline: 1 }))
    expectBad(() => requestItemCount({ ...base, tensors: { x, y: jsonToTensor('y', 'INT8', [3], [1, 2, 3]) } }))
    expectBad(() => requestItemCount({ ...base, tensors: {} }))
  })
})

describe('reply', () => {
  it('round-trips outputs, per-item errors and timing', () => {
    const r: InferReply = {
      v: 1,
      id: 'r1',
      errors: [null, { code: 'PREDICTOR_FAILED', message: 'boom' }],
      tensors: { y: x },
      timing: [
        { queueMs: 1, computeMs: 2.5, batchSize: 2 },
        { queueMs: 0, computeMs: 2.5, batchSize: 2 },
      ],
      worker: 'w1',
    }
    const back = decodeReply(encodeReply(r))
    expect(back).toMatchObject({ v: 1, id: 'r1', errors: r.errors, timing: r.timing, worker: 'w1' })
    expect(tensorToJson(back.tensors!.y!)).toEqual([1, 2, 3, 4])
    expect(decodeReply(encodeReply({ v: 1, id: 'r2', items: [{ label: 'cat' }] })).items).toEqual([{ label: 'cat' }])
    expect(decodeReply(encodeReply({ v: 1, id: 'r3', error: { code: 'MODEL_NOT_FOUND', message: 'no' } })).error).toEqual({
      code: 'MODEL_NOT_FOUND',
      message: 'no',
    })
  })

  it('rejects malformed replies', () => {
    const rep = (o: Record<string, unknown>) => raw({ v: 1, id: 'r', ...o })
    const cases: [Uint8Array, RegExp][] = [
      [raw({ id: 'r' }), /reply\.v must be 1/],
      [rep({ id: 1 }), /reply\.id must be a string/],
      [rep({ error: 'boom' }), /reply\.error must be/],
      [rep({ error: { code: 'X' } }), /reply\.error must be/],
      [rep({ errors: [{ code: 1, message: 'x' }] }), /reply\.errors must be/],
      [rep({ errors: 'x' }), /reply\.errors must be/],
      [rep({ timing: [{ queueMs: 1 }] }), /reply\.timing must be/],
      [rep({ items: 5 }), /reply\.items must be an array/],
      [rep({ worker: 5 }), /reply\.worker must be a string/],
      [rep({ tensors: { y: { ...x, datatype: 'FP7' } } }), /unknown datatype/],
      [rep({ tensors: { y: x, z: jsonToTensor('z', 'INT8', [1], [1]) } }), /shape\[0\] must agree/],
      [rep({ tensors: { y: x }, errors: [null] }), /reply\.errors has 1 items but reply\.tensors has 2/],
      [rep({ items: [1, 2], timing: [{ queueMs: 1, computeMs: 1, batchSize: 1 }] }), /timing has 1 items/],
    ]
    for (const [buf, msg] of cases) expectBad(() => decodeReply(buf), msg)
    expectBad(() => decodeReply(new Uint8Array([0x92, 1])))
  })
})

describe('cancel and values', () => {
  it('round-trips and validates cancel notices', () => {
    expect(decodeCancel(encodeCancel({ v: 1, id: 'abc' }))).toEqual({ v: 1, id: 'abc' })
    expectBad(() => decodeCancel(raw({ v: 1, id: 7 })), /cancel\.id must be a string/)
    expectBad(() => decodeCancel(raw({ v: 0, id: 'a' })), /cancel\.v must be 1/)
    expectBad(() => decodeCancel(new Uint8Array([0xff, 0xff])))
  })

  it('round-trips metadata and binary values', () => {
    const meta: ModelMeta = {
      name: 'demo',
      versions: ['1'],
      platform: 'onnxruntime',
      kind: 'onnx',
      ready: true,
      maxBatchSize: 32,
      maxDelayMs: 5,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }],
      outputs: [],
      inputSchema: undefined,
    }
    const back = decodeValue(encodeValue(meta))
    expect(back).toEqual({ ...meta, inputSchema: undefined })
    expect(Object.keys(back as object)).not.toContain('inputSchema')
    const bin = decodeValue(encodeValue({ b: new Uint8Array([1, 2, 3]) })) as { b: Uint8Array }
    expect(bin.b).toBeInstanceOf(Uint8Array)
    expect([...bin.b]).toEqual([1, 2, 3])
    expect(decodeValue(encodeValue([1, undefined, 3]))).toEqual([1, null, 3])
    expectBad(() => decodeValue(new Uint8Array([0x81])))
  })
})

/** Run `fn`; it must return or throw CohortError BAD_REQUEST, nothing else. */
function onlyBadRequest(fn: () => unknown): void {
  try {
    fn()
  } catch (e) {
    if (!(e instanceof CohortError) || e.code !== 'BAD_REQUEST') {
      throw new Error(`unexpected ${String(e)}`, { cause: e })
    }
  }
}

const decoders = [decodeRequest, decodeReply, decodeCancel, decodeValue]

describe('decoders never throw anything but BAD_REQUEST', () => {
  it('random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        for (const d of decoders) onlyBadRequest(() => d(bytes))
      }),
      { numRuns: 3000 },
    )
  })

  it('random msgpack values', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withTypedArray: true, withDate: true, withMap: true, withSet: true }), (v) => {
        let bytes: Uint8Array
        try {
          bytes = encodeValue(v)
        } catch {
          return
        }
        for (const d of decoders) onlyBadRequest(() => d(bytes))
      }),
      { numRuns: 1000 },
    )
  })

  it('envelope-shaped values', () => {
    const any = fc.anything({ maxDepth: 2 })
    const tensor = fc.record(
      {
        datatype: fc.oneof(fc.constantFrom(...DATATYPES), any),
        shape: fc.oneof(fc.array(fc.oneof(fc.nat(5), fc.integer(), fc.double(), any), { maxLength: 4 }), any),
        bytes: fc.oneof(fc.uint8Array({ maxLength: 64 }), any),
      },
      { requiredKeys: [] },
    )
    const wireError = fc.oneof(fc.record({ code: fc.string(), message: fc.string() }), any)
    const envelope = fc.record(
      {
        v: fc.oneof(fc.constant(1), any),
        id: fc.oneof(fc.string(), any),
        model: fc.oneof(fc.string(), any),
        deadline: fc.oneof(fc.double(), any),
        priority: fc.oneof(fc.double(), any),
        traceparent: fc.oneof(fc.string(), any),
        outputs: fc.oneof(fc.array(fc.string()), any),
        tensors: fc.oneof(fc.dictionary(fc.string(), tensor, { maxKeys: 3 }), any),
        items: fc.oneof(fc.array(any), any),
        error: wireError,
        errors: fc.oneof(fc.array(fc.oneof(fc.constant(null), wireError)), any),
        timing: fc.oneof(fc.array(fc.record({ queueMs: fc.double(), computeMs: fc.double(), batchSize: fc.nat() })), any),
        worker: fc.oneof(fc.string(), any),
      },
      { requiredKeys: [] },
    )
    fc.assert(
      fc.property(envelope, (v) => {
        const bytes = encodeValue(v)
        for (const d of decoders) onlyBadRequest(() => d(bytes))
      }),
      { numRuns: 2000 },
    )
  })

  it('mutated valid messages', () => {
    const good = [
      encodeRequest(base),
      encodeRequest({ v: 1, id: 'i', model: 'm', deadline: 1, items: [{ a: [1, 'b'] }] }),
      encodeReply({ v: 1, id: 'r', errors: [null, null], tensors: { y: x } }),
    ]
    expect(good.map((g, i) => (i < 2 ? decodeRequest(g) : decodeReply(g)).id)).toEqual(['r1', 'i', 'r'])
    fc.assert(
      fc.property(fc.constantFrom(...good), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), fc.nat(), (src, flips, cut) => {
        const bytes = new Uint8Array(src)
        for (const [i, b] of flips) bytes[i % bytes.length] = b
        for (const d of decoders) {
          onlyBadRequest(() => d(bytes))
          onlyBadRequest(() => d(bytes.subarray(0, cut % bytes.length)))
        }
      }),
      { numRuns: 3000 },
    )
  })
})
