import { describe, expect, it } from 'vitest'
import { REC_HEIGHT, charset, ctcDecode, recInput, widthBucket } from './rec.ts'
import type { Box } from './det.ts'

describe('widthBucket', () => {
  it('picks the smallest bucket that fits, or the widest', () => {
    expect(widthBucket(1)).toBe(128)
    expect(widthBucket(128)).toBe(128)
    expect(widthBucket(129)).toBe(256)
    expect(widthBucket(5000)).toBe(1024)
    expect(widthBucket(70, [64, 96])).toBe(96)
    expect(() => widthBucket(10, [])).toThrow(RangeError)
  })
})

describe('recInput', () => {
  const img = { width: 100, height: 20, data: new Uint8Array(100 * 20 * 3).fill(255) }
  const box = (x0: number, y0: number, x1: number, y1: number): Box => [
    [x0, y0],
    [x1, y0],
    [x1, y1],
    [x0, y1],
  ]

  it('resizes a crop to height 48, keeps its aspect ratio and zero-pads it to its bucket', () => {
    const r = recInput(img, box(0, 0, 100, 20))
    // 100 x 20 -> 240 x 48, bucket 256.
    expect(r.shape).toEqual([3, REC_HEIGHT, 256])
    expect(r.data[239]).toBeCloseTo(1, 5)
    expect(r.data[240]).toBe(0)
  })

  it('groups crops of similar width into one bucket across sizes', () => {
    expect(recInput(img, box(0, 0, 50, 20)).shape[2]).toBe(128)
    expect(recInput(img, box(0, 0, 40, 10)).shape[2]).toBe(256)
    expect(recInput(img, box(0, 0, 100, 4), [128, 256]).shape[2]).toBe(256)
  })
})

describe('charset', () => {
  it('puts the CTC blank first and a space last', () => {
    expect(charset('a\nb\nc')).toEqual(['', 'a', 'b', 'c', ' '])
    expect(charset('a\r\nb\n')).toEqual(['', 'a', 'b', ' '])
  })
})

describe('ctcDecode', () => {
  const chars = charset('h\ni')
  const probs = (best: number[]) => {
    const out = new Float32Array(best.length * chars.length).fill(0.01)
    best.forEach((c, t) => (out[t * chars.length + c] = 0.9 - t * 0.1))
    return out
  }

  it('collapses repeats, drops blanks and keeps letters separated by a blank', () => {
    // h h _ i _ i space
    expect(ctcDecode(probs([1, 1, 0, 2, 0, 2, 3]), 7, chars).text).toBe('hii ')
  })

  it('scores by the mean probability of the kept characters', () => {
    const d = ctcDecode(probs([1, 1, 0, 2]), 4, chars)
    expect(d.text).toBe('hi')
    expect(d.score).toBeCloseTo((0.9 + 0.6) / 2, 5)
    expect(ctcDecode(probs([0, 0]), 2, chars)).toEqual({ text: '', score: 0 })
  })

  it('rejects probabilities of the wrong size', () => {
    expect(() => ctcDecode(new Float32Array(5), 2, chars)).toThrow(RangeError)
  })
})
