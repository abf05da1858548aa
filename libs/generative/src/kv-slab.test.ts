// The slab's views are stable objects until a resize (ortDecoderSession caches its ort.Tensors by
// them), and fits() says exactly when fit() would change the capacity.
import { describe, expect, it } from 'vitest'
import { KvSlab, SLAB_BUCKET } from './kv-slab.ts'

describe('KvSlab', () => {
  it('returns the same view objects for the same rows until the capacity changes, then views of the new buffers', () => {
    const slab = new KvSlab(4, 2, 1, 2, 1024)
    slab.fit(10, [])
    const a = slab.views(0, 3)
    expect(slab.views(0, 3)).toBe(a)
    expect(slab.views(1, 1)).not.toBe(a)
    expect(a[0]?.dims).toEqual([3, 1, SLAB_BUCKET, 2])
    slab.fit(SLAB_BUCKET + 1, [5, 5, 5])
    const b = slab.views(0, 3)
    expect(b).not.toBe(a)
    expect(b[0]?.dims).toEqual([3, 1, 2 * SLAB_BUCKET, 2])
    expect(b[0]?.data.buffer).not.toBe(a[0]?.data.buffer)
  })

  it('fits(need) is true exactly when fit(need) leaves the capacity (grows at once, shrinks only under half)', () => {
    const slab = new KvSlab(2, 2, 1, 2, 1024)
    expect(slab.fits(1)).toBe(false)
    slab.fit(1, [])
    expect(slab.capacity).toBe(SLAB_BUCKET)
    expect(slab.fits(SLAB_BUCKET)).toBe(true)
    expect(slab.fits(SLAB_BUCKET + 1)).toBe(false)
    slab.fit(3 * SLAB_BUCKET, [])
    expect(slab.fits(2 * SLAB_BUCKET)).toBe(true) // 128 of 192: not under half
    expect(slab.fits(SLAB_BUCKET)).toBe(false) // 64 of 192: under half, shrinks
    const resizes = slab.resizes
    slab.fit(2 * SLAB_BUCKET, [])
    expect(slab.resizes).toBe(resizes)
  })
})
