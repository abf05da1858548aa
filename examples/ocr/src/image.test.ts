import jpeg from 'jpeg-js'
import { PNG } from 'pngjs'
import { describe, expect, it } from 'vitest'
import { BadImageError, decodeImage } from './image.ts'

function png(width: number, height: number, rgba: number[]): string {
  const p = new PNG({ width, height })
  p.data = Buffer.from(Array.from({ length: width * height }, () => rgba).flat())
  return `data:image/png;base64,${PNG.sync.write(p).toString('base64')}`
}

describe('decodeImage', () => {
  it('decodes a PNG data URL to RGB, compositing alpha over white', () => {
    const img = decodeImage(png(3, 2, [10, 20, 30, 255]))
    expect([img.width, img.height]).toEqual([3, 2])
    expect(Array.from(img.data.slice(0, 3))).toEqual([10, 20, 30])
    expect(Array.from(decodeImage(png(1, 1, [0, 0, 0, 0])).data)).toEqual([255, 255, 255])
  })

  it('decodes a JPEG data URL', () => {
    const raw = { width: 8, height: 8, data: Buffer.alloc(8 * 8 * 4, 200) }
    const b64 = Buffer.from(jpeg.encode(raw, 95).data).toString('base64')
    const img = decodeImage(`data:image/jpeg;base64,${b64}`)
    expect([img.width, img.height]).toEqual([8, 8])
    expect(Math.abs(img.data[0]! - 200)).toBeLessThan(4)
  })

  it('rejects garbage, non-images and truncated images with BadImageError', () => {
    expect(() => decodeImage('data:image/png;base64,%%%not base64%%%')).toThrow(BadImageError)
    expect(() => decodeImage('')).toThrow(BadImageError)
    expect(() => decodeImage(`data:image/png;base64,${Buffer.from('hello, not an image').toString('base64')}`)).toThrow(BadImageError)
    const truncated = png(4, 4, [1, 2, 3, 255]).slice(0, 60)
    expect(() => decodeImage(truncated)).toThrow(BadImageError)
  })

  it('rejects an image of more than MAX_IMAGE_PIXELS from its header, before decoding it', () => {
    const bytes = Buffer.from(png(2, 2, [0, 0, 0, 255]).split(',')[1]!, 'base64')
    bytes.writeUInt32BE(100_000, 16)
    bytes.writeUInt32BE(100_000, 20)
    expect(() => decodeImage(`data:image/png;base64,${bytes.toString('base64')}`)).toThrow(/at most/)
  })
})
