import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { Registry, bucketCounts, bucketDeltas, histogramQuantile, parsePrometheus, type CumulativeBucket } from './index.ts'

const b = (pairs: [number, number][]): CumulativeBucket[] => pairs.map(([le, count]) => ({ le, count }))

describe('histogramQuantile', () => {
  it('interpolates linearly inside the bucket that holds the rank', () => {
    // 10 observations in (0, 1], 10 in (1, 2]
    const h = b([
      [1, 10],
      [2, 20],
      [Infinity, 20],
    ])
    expect(histogramQuantile(0.5, h)).toBeCloseTo(1)
    expect(histogramQuantile(0.25, h)).toBeCloseTo(0.5)
    expect(histogramQuantile(0.75, h)).toBeCloseTo(1.5)
    expect(histogramQuantile(0.99, h)).toBeCloseTo(1.98)
    expect(histogramQuantile(1, h)).toBeCloseTo(2)
  })

  it('skips empty buckets and starts the first bucket at 0', () => {
    const h = b([
      [0.001, 0],
      [0.01, 0],
      [0.1, 4],
      [1, 4],
      [Infinity, 4],
    ])
    // All 4 observations in (0.01, 0.1]: the median is half way.
    expect(histogramQuantile(0.5, h)).toBeCloseTo(0.055)
    expect(
      histogramQuantile(
        0.5,
        b([
          [4, 2],
          [Infinity, 2],
        ]),
      ),
    ).toBeCloseTo(2)
  })

  it('answers the highest finite bound for ranks in the +Inf bucket, undefined when empty', () => {
    expect(
      histogramQuantile(
        0.99,
        b([
          [1, 1],
          [2, 1],
          [Infinity, 100],
        ]),
      ),
    ).toBe(2)
    expect(
      histogramQuantile(
        0.5,
        b([
          [1, 0],
          [Infinity, 0],
        ]),
      ),
    ).toBeUndefined()
    expect(histogramQuantile(0.5, [])).toBeUndefined()
    expect(histogramQuantile(0.5, b([[Infinity, 3]]))).toBeUndefined()
    expect(() =>
      histogramQuantile(
        1.5,
        b([
          [1, 1],
          [Infinity, 1],
        ]),
      ),
    ).toThrow(RangeError)
  })

  it('matches what the Registry renders', () => {
    const r = new Registry()
    const h = r.histogram('lat_seconds', 'x', [0.01, 0.02, 0.05, 0.1])
    for (let i = 0; i < 90; i++) {
      h.observe({}, 0.015)
    }
    for (let i = 0; i < 10; i++) {
      h.observe({}, 0.07)
    }
    const m = parsePrometheus(r.render())
    const buckets = ['0.01', '0.02', '0.05', '0.1', '+Inf'].map((le) => ({
      le: Number(le.replace('+Inf', 'Infinity')),
      count: m.get(`lat_seconds_bucket{le="${le}"}`) ?? NaN,
    }))
    expect(histogramQuantile(0.5, buckets)).toBeCloseTo(0.01 + 0.01 * (50 / 90))
    // p99: rank 99 is the 9th of the 10 observations in (0.05, 0.1].
    expect(histogramQuantile(0.99, buckets)).toBeCloseTo(0.05 + 0.05 * 0.9)
  })

  it('is monotone in q and stays within the finite bounds', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(50), { minLength: 1, maxLength: 8 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }), (per, q1, q2) => {
        let acc = 0
        const h = per.map((n, i) => ({ le: 2 ** i, count: (acc += n) }))
        h.push({ le: Infinity, count: acc })
        const a = histogramQuantile(Math.min(q1, q2), h)
        const z = histogramQuantile(Math.max(q1, q2), h)
        if (acc === 0) {
          return a === undefined && z === undefined
        }
        return a !== undefined && z !== undefined && a <= z + 1e-12 && a >= 0 && z <= 2 ** (per.length - 1)
      }),
    )
  })
})

describe('bucketDeltas', () => {
  it('subtracts bucket by bucket', () => {
    const prev = b([
      [1, 2],
      [2, 5],
      [Infinity, 6],
    ])
    const cur = b([
      [1, 3],
      [2, 9],
      [Infinity, 12],
    ])
    expect(bucketDeltas(cur, prev)).toEqual(
      b([
        [1, 1],
        [2, 4],
        [Infinity, 6],
      ]),
    )
    expect(bucketDeltas(cur, undefined)).toEqual(cur)
  })

  it('treats a decrease as a counter reset', () => {
    const prev = b([
      [1, 5],
      [Infinity, 9],
    ])
    const cur = b([
      [1, 1],
      [Infinity, 2],
    ])
    expect(bucketDeltas(cur, prev)).toEqual(cur)
  })
})

describe('bucketCounts', () => {
  it('turns cumulative buckets into per-bucket counts', () => {
    expect(
      bucketCounts(
        b([
          [1, 2],
          [2, 2],
          [4, 7],
          [Infinity, 8],
        ]),
      ),
    ).toEqual(
      b([
        [1, 2],
        [2, 0],
        [4, 5],
        [Infinity, 1],
      ]),
    )
  })
})
