import * as ort from 'onnxruntime-node'
import { describe, expect, it } from 'vitest'
import { buildDemoMlp, buildIdentityAllTypes, buildMultiIoModel, buildVariableLengthModel, demoMlpReference, demoMlpWeights, IDENTITY_DATATYPES } from './models.ts'
import type { Datatype } from './onnx.ts'
import { mulberry32 } from './random.ts'

const BATCHES = [1, 5] as const

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-4): void {
  expect(actual.length).toBe(expected.length)
  let worst = 0
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i] as number
    const e = expected[i] as number
    worst = Math.max(worst, Math.abs(a - e) / Math.max(1, Math.abs(e)))
  }
  expect(worst).toBeLessThanOrEqual(tol)
}

function uniformInput(n: number, seed: number): Float32Array {
  const rand = mulberry32(seed)
  return Float32Array.from({ length: n }, () => rand() * 2 - 1)
}

describe('demo MLP', () => {
  it('is byte-identical across builds and differs by seed', () => {
    const a = buildDemoMlp()
    const b = buildDemoMlp(42)
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true)
    expect(Buffer.from(buildDemoMlp(7)).equals(Buffer.from(a))).toBe(false)
  })

  it('has deterministic weights with He-style scale', () => {
    const w = demoMlpWeights()
    expect(w.w1.length).toBe(256 * 1024)
    expect(w.b1.length).toBe(1024)
    expect(w.w2.length).toBe(1024 * 1024)
    expect(w.b2.length).toBe(1024)
    expect(w.w3.length).toBe(1024 * 10)
    expect(w.b3.length).toBe(10)
    expect(Buffer.from(w.w2.buffer).equals(Buffer.from(demoMlpWeights().w2.buffer))).toBe(true)
    let ss = 0
    for (const v of w.w2) ss += v * v
    expect(Math.sqrt(ss / w.w2.length)).toBeCloseTo(Math.sqrt(2 / 1024), 3)
    expect(Math.max(...w.b1.map(Math.abs))).toBeLessThan(0.1)
  })

  it('matches the JS reference at batch 1 and 5 with a dynamic batch dim', async () => {
    const session = await ort.InferenceSession.create(buildDemoMlp())
    expect(session.inputNames).toEqual(['input'])
    expect(session.outputNames).toEqual(['logits'])
    for (const rows of BATCHES) {
      const x = uniformInput(rows * 256, rows)
      const out = await session.run({ input: new ort.Tensor('float32', x, [rows, 256]) })
      const logits = out.logits as ort.Tensor
      expect(logits.type).toBe('float32')
      expect(logits.dims).toEqual([rows, 10])
      const ref = demoMlpReference(x, rows)
      expect(ref.some((v) => Math.abs(v) > 0.1)).toBe(true) // not a degenerate all-zero net
      expectClose(logits.data as Float32Array, ref)
    }
  })
})

describe('multi-io model', () => {
  it('computes y = 2x + 1, ids_sq = ids^2 and x_sum = sum(x, axis 1)', async () => {
    const session = await ort.InferenceSession.create(buildMultiIoModel())
    expect(session.inputNames).toEqual(['x', 'ids'])
    expect(session.outputNames).toEqual(['y', 'ids_sq', 'x_sum'])
    for (const rows of BATCHES) {
      const x = Float32Array.from({ length: rows * 4 }, (_, i) => i * 0.25 - 1.5)
      const ids = BigInt64Array.from({ length: rows * 3 }, (_, i) => BigInt(i * 1_000_003 - 7))
      const out = await session.run({
        x: new ort.Tensor('float32', x, [rows, 4]),
        ids: new ort.Tensor('int64', ids, [rows, 3]),
      })
      const y = out.y as ort.Tensor
      const idsSq = out.ids_sq as ort.Tensor
      const xSum = out.x_sum as ort.Tensor
      expect(y.dims).toEqual([rows, 4])
      expect(idsSq.dims).toEqual([rows, 3])
      expect(xSum.dims).toEqual([rows, 1])
      expect(Array.from(y.data as Float32Array)).toEqual(Array.from(x, (v) => v * 2 + 1))
      expect(idsSq.type).toBe('int64')
      expect(Array.from(idsSq.data as BigInt64Array)).toEqual(Array.from(ids, (v) => v * v))
      const sums = Array.from({ length: rows }, (_, r) => x.subarray(r * 4, r * 4 + 4).reduce((a, b) => a + b, 0))
      expectClose(xSum.data as Float32Array, sums, 1e-6)
    }
  })
})

/** ORT tensor type and sample values (row-major, 2 per row) for each datatype. */
function identityFeed(dt: Datatype, rows: number): ort.Tensor {
  const n = rows * 2
  const dims = [rows, 2]
  const idx = Array.from({ length: n }, (_, i) => i)
  switch (dt) {
    case 'BOOL':
      return new ort.Tensor(
        'bool',
        Uint8Array.from(idx, (i) => (i % 3 === 0 ? 1 : 0)),
        dims,
      )
    case 'UINT8':
      return new ort.Tensor(
        'uint8',
        Uint8Array.from(idx, (i) => 255 - i),
        dims,
      )
    case 'INT8':
      return new ort.Tensor(
        'int8',
        Int8Array.from(idx, (i) => -128 + i * 37),
        dims,
      )
    case 'UINT16':
      return new ort.Tensor(
        'uint16',
        Uint16Array.from(idx, (i) => 65535 - i * 1000),
        dims,
      )
    case 'INT16':
      return new ort.Tensor(
        'int16',
        Int16Array.from(idx, (i) => -32768 + i * 7000),
        dims,
      )
    case 'INT32':
      return new ort.Tensor(
        'int32',
        Int32Array.from(idx, (i) => -(2 ** 31) + i * 123456789),
        dims,
      )
    case 'INT64':
      return new ort.Tensor(
        'int64',
        BigInt64Array.from(idx, (i) => -(2n ** 63n) + BigInt(i) * 10n ** 18n),
        dims,
      )
    case 'UINT32':
      return new ort.Tensor(
        'uint32',
        Uint32Array.from(idx, (i) => 2 ** 32 - 1 - i * 99991),
        dims,
      )
    case 'UINT64':
      return new ort.Tensor(
        'uint64',
        BigUint64Array.from(idx, (i) => 2n ** 64n - 1n - BigInt(i) * 10n ** 18n),
        dims,
      )
    // FP16 travels as raw half bits: 1.0, -2.0, 65504, +Inf, a subnormal, NaN...
    case 'FP16':
      return new ort.Tensor(
        'float16',
        Uint16Array.from(idx, (i) => [0x3c00, 0xc000, 0x7bff, 0x7c00, 0x0001, 0x7e00][i % 6] as number),
        dims,
      )
    case 'FP32':
      return new ort.Tensor(
        'float32',
        Float32Array.from(idx, (i) => (i - 3) * 1.5e-3),
        dims,
      )
    case 'FP64':
      return new ort.Tensor(
        'float64',
        Float64Array.from(idx, (i) => (i - 3) * 1e300 + 0.1),
        dims,
      )
    case 'BYTES':
      return new ort.Tensor(
        'string',
        idx.map((i) => ['', 'a', 'héllo', '日本', 'x'.repeat(i)][i % 5] as string),
        dims,
      )
  }
}

describe('identity over all datatypes', () => {
  it('round-trips every datatype unchanged', async () => {
    const session = await ort.InferenceSession.create(buildIdentityAllTypes())
    expect(session.inputNames).toEqual(IDENTITY_DATATYPES.map((dt) => `in_${dt}`))
    expect(session.outputNames).toEqual(IDENTITY_DATATYPES.map((dt) => `out_${dt}`))
    for (const rows of BATCHES) {
      const feeds = Object.fromEntries(IDENTITY_DATATYPES.map((dt) => [`in_${dt}`, identityFeed(dt, rows)]))
      const out = await session.run(feeds)
      for (const dt of IDENTITY_DATATYPES) {
        const input = feeds[`in_${dt}`] as ort.Tensor
        const output = out[`out_${dt}`] as ort.Tensor
        expect(output.type, dt).toBe(input.type)
        expect(output.dims, dt).toEqual([rows, 2])
        expect(output.data.constructor, dt).toBe(input.data.constructor)
        expect(Array.from(output.data as ArrayLike<unknown>), dt).toEqual(Array.from(input.data as ArrayLike<unknown>))
      }
    }
  })

  it('accepts boolean[] for bool tensors and returns 0/1 bytes', async () => {
    const session = await ort.InferenceSession.create(buildIdentityAllTypes())
    const feeds = Object.fromEntries(IDENTITY_DATATYPES.map((dt) => [`in_${dt}`, identityFeed(dt, 2)]))
    feeds.in_BOOL = new ort.Tensor('bool', [true, false, false, true], [2, 2])
    const out = await session.run(feeds, ['out_BOOL'])
    expect(out.out_BOOL?.data).toEqual(Uint8Array.from([1, 0, 0, 1]))
  })
})

describe('variable-length model', () => {
  it('sums each row over a symbolic seq dimension', async () => {
    const session = await ort.InferenceSession.create(buildVariableLengthModel())
    expect(session.inputNames).toEqual(['tokens'])
    expect(session.outputNames).toEqual(['total'])
    for (const rows of BATCHES) {
      for (const seq of [1, 3, 17]) {
        const tokens = Float32Array.from({ length: rows * seq }, (_, i) => (i % 7) - 2.5)
        const out = await session.run({ tokens: new ort.Tensor('float32', tokens, [rows, seq]) })
        const total = out.total as ort.Tensor
        expect(total.dims).toEqual([rows, 1])
        const ref = Array.from({ length: rows }, (_, r) => tokens.subarray(r * seq, (r + 1) * seq).reduce((a, b) => a + b, 0))
        expectClose(total.data as Float32Array, ref, 1e-6)
      }
    }
  })
})
