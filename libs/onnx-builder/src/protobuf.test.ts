import { describe, expect, it } from 'vitest'
import { encodeVarint, ProtoWriter } from './protobuf.ts'
import { mulberry32, normalSampler } from './random.ts'

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')

describe('encodeVarint', () => {
  it.each([
    [0, '00'],
    [1, '01'],
    [127, '7f'],
    [128, '8001'],
    [300, 'ac02'],
    [2 ** 31, '8080808008'],
    [2 ** 32, '8080808010'],
    [Number.MAX_SAFE_INTEGER, 'ffffffffffffff0f'],
    [2n ** 64n - 1n, 'ffffffffffffffffff01'],
  ] as const)('%s -> %s', (value, expected) => {
    expect(hex(encodeVarint(value))).toBe(expected)
  })

  it("encodes negatives as 10-byte two's complement", () => {
    expect(hex(encodeVarint(-1))).toBe('ffffffffffffffffff01')
    expect(hex(encodeVarint(-1n))).toBe('ffffffffffffffffff01')
    expect(hex(encodeVarint(-2))).toBe('feffffffffffffffff01')
    expect(hex(encodeVarint(-(2n ** 63n)))).toBe('80808080808080808001')
    expect(encodeVarint(-300).length).toBe(10)
  })

  it('rejects non-integers and values beyond 64 bits', () => {
    expect(() => encodeVarint(1.5)).toThrow(RangeError)
    expect(() => encodeVarint(2n ** 64n)).toThrow(RangeError)
    expect(() => encodeVarint(-(2n ** 63n) - 1n)).toThrow(RangeError)
  })
})

describe('ProtoWriter', () => {
  it('writes tags and scalar fields', () => {
    // The protobuf docs' examples: field 1 varint 150; field 2 string "testing".
    expect(hex(new ProtoWriter().varint(1, 150).finish())).toBe('089601')
    expect(hex(new ProtoWriter().string(2, 'testing').finish())).toBe('120774657374696e67')
    expect(hex(new ProtoWriter().varint(20, 7).finish())).toBe('a00107') // two-byte tag
    expect(hex(new ProtoWriter().varint(3, true).finish())).toBe('1801')
    expect(hex(new ProtoWriter().float(2, 1).finish())).toBe('150000803f')
    expect(hex(new ProtoWriter().double(1, 1).finish())).toBe('09000000000000f03f')
    expect(hex(new ProtoWriter().fixed32(1, 0xdeadbeef).finish())).toBe('0defbeadde')
    expect(hex(new ProtoWriter().fixed64(1, -1n).finish())).toBe('09ffffffffffffffff')
  })

  it('writes packed repeated fields and skips empty ones', () => {
    // The protobuf docs' packed example: field 4, [3, 270, 86942].
    expect(hex(new ProtoWriter().packedVarint(4, [3, 270, 86942]).finish())).toBe('2206038e029ea705')
    expect(hex(new ProtoWriter().packedFloat(7, [1, -2]).finish())).toBe('3a080000803f000000c0')
    expect(new ProtoWriter().packedVarint(4, []).finish().length).toBe(0)
  })

  it('nests messages and grows past its initial buffer', () => {
    const inner = new ProtoWriter().varint(1, 150).finish()
    expect(hex(new ProtoWriter().message(3, inner).finish())).toBe('1a03089601')
    const big = new Uint8Array(100_000).fill(7)
    const out = new ProtoWriter().bytes(1, big).varint(2, 1).finish()
    expect(out.length).toBe(1 + 3 + 100_000 + 2)
    expect(hex(out.subarray(0, 4))).toBe('0aa08d06')
    expect(out[out.length - 3]).toBe(7)
  })
})

describe('random', () => {
  it('mulberry32 is deterministic and uniform in [0, 1)', () => {
    const a = mulberry32(42)
    const b = mulberry32(42)
    const xs = Array.from({ length: 10_000 }, () => a())
    expect(xs).toEqual(Array.from({ length: 10_000 }, () => b()))
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0)
    expect(Math.max(...xs)).toBeLessThan(1)
    expect(xs.reduce((s, x) => s + x, 0) / xs.length).toBeCloseTo(0.5, 1)
    expect(mulberry32(43)()).not.toBe(mulberry32(42)())
  })

  it('normalSampler has mean 0 and std 1', () => {
    const normal = normalSampler(mulberry32(1))
    const xs = Array.from({ length: 50_000 }, normal)
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length
    const std = Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / xs.length)
    expect(Math.abs(mean)).toBeLessThan(0.02)
    expect(Math.abs(std - 1)).toBeLessThan(0.02)
    const again = normalSampler(mulberry32(1))
    expect(Array.from({ length: 5 }, again)).toEqual(xs.slice(0, 5))
  })
})
