import { describe, expect, it } from 'vitest'
import { components, dbBoxes, detInput, detSize, readingOrder, type Box } from './det.ts'

function map(w: number, h: number, rects: Array<[number, number, number, number, number]>): Float32Array {
  const m = new Float32Array(w * h).fill(0.05)
  for (const [x0, y0, rw, rh, p] of rects) {
    for (let y = y0; y < y0 + rh; y++) {
      for (let x = x0; x < x0 + rw; x++) {
        m[y * w + x] = p
      }
    }
  }
  return m
}

describe('detSize', () => {
  it('rounds each side to a multiple of 32 and scales the longest side down to maxSide', () => {
    expect(detSize(384, 160)).toEqual({ w: 384, h: 160 })
    expect(detSize(100, 20)).toEqual({ w: 96, h: 32 })
    expect(detSize(1920, 1080)).toEqual({ w: 960, h: 544 })
    expect(detSize(1920, 1080, 640)).toEqual({ w: 640, h: 352 })
  })
})

describe('detInput', () => {
  it('gives a [3, h, w] BGR tensor normalised with the ImageNet mean and std', () => {
    const img = { width: 32, height: 32, data: new Uint8Array(32 * 32 * 3) }
    for (let p = 0; p < 32 * 32; p++) {
      img.data.set([255, 0, 0], p * 3)
    }
    const t = detInput(img)
    expect(t.shape).toEqual([3, 32, 32])
    expect(t.data[0]).toBeCloseTo((0 - 0.485) / 0.229, 5)
    expect(t.data[32 * 32]).toBeCloseTo((0 - 0.456) / 0.224, 5)
    expect(t.data[2 * 32 * 32]).toBeCloseTo((1 - 0.406) / 0.225, 5)
  })
})

describe('components', () => {
  it('joins 8-connected pixels and separates the rest', () => {
    // prettier-ignore
    const mask = Uint8Array.from([1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0])
    const cs = components(mask, 4, 3)
    expect(cs.map((c) => [c.x0, c.y0, c.x1, c.y1, c.size])).toEqual([
      [0, 0, 1, 1, 2],
      [3, 0, 3, 1, 2],
    ])
  })
})

describe('dbBoxes', () => {
  it('finds each text region, scores it, unclips it and scales it to the source image', () => {
    const m = map(64, 32, [
      [10, 8, 20, 8, 0.9],
      [40, 20, 16, 6, 0.8],
    ])
    const ds = dbBoxes(m, 64, 32, 128, 64)
    expect(ds).toHaveLength(2)
    const first = ds.find((d) => d.box[0][0] < 40)!
    // d = area * 1.5 / perimeter = 160 * 1.5 / 56; corners scaled by 2.
    expect(first.box).toEqual([
      [11, 7],
      [69, 7],
      [69, 41],
      [11, 41],
    ])
    expect(first.score).toBeCloseTo(0.9, 5)
    const second = ds.find((d) => d.box[0][0] >= 40)!
    expect(second.score).toBeCloseTo(0.8, 5)
  })

  it('drops regions below the box threshold, thin regions, and clips boxes to the image', () => {
    const m = map(64, 32, [
      [2, 2, 20, 8, 0.45], // above thresh 0.3 but mean below boxThresh 0.6
      [30, 2, 20, 2, 0.95], // short side 2 < minSize 3
      [0, 20, 30, 12, 0.9], // touches the corner: clipped
    ])
    const ds = dbBoxes(m, 64, 32, 64, 32)
    expect(ds).toHaveLength(1)
    // d = 360 * 1.5 / 84 = 6.43: the left and bottom edges are clipped.
    expect(ds[0]!.box[0]).toEqual([0, 14])
    expect(ds[0]!.box[2]).toEqual([36, 32])
    expect(dbBoxes(m, 64, 32, 64, 32, { boxThresh: 0.4 })).toHaveLength(2)
  })

  it('returns nothing for an empty map', () => {
    expect(dbBoxes(new Float32Array(32 * 32), 32, 32, 32, 32)).toEqual([])
  })
})

describe('readingOrder', () => {
  const at = (x: number, y: number): { box: Box } => ({
    box: [
      [x, y],
      [x + 5, y],
      [x + 5, y + 5],
      [x, y + 5],
    ],
  })
  it('sorts top-to-bottom, then left-to-right within a line', () => {
    const order = readingOrder([at(50, 100), at(10, 3), at(60, 0), at(5, 104)])
    expect(order.map((o) => o.box[0])).toEqual([
      [10, 3],
      [60, 0],
      [5, 104],
      [50, 100],
    ])
  })
})
