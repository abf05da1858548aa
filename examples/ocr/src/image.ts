/**
 * Images for the OCR example: decode a `data:` URL (PNG or JPEG) into 8-bit RGB, and resize or crop
 * it with bilinear sampling. Pure JS (pngjs, jpeg-js): no native image library.
 * @module
 */
import jpeg from 'jpeg-js'
import { PNG } from 'pngjs'
import { at } from './at.ts'

/** An 8-bit RGB image, row-major, 3 bytes per pixel. */
export interface RgbImage {
  width: number
  height: number
  data: Uint8Array
}

/** Thrown for input that is not a decodable PNG or JPEG (the stage maps it to a 400 item error). */
export class BadImageError extends Error {
  override name = 'BadImageError'
}

/** Largest decoded image accepted, in pixels (a 4096 x 4096 image), so a tiny PNG cannot expand to gigabytes. */
export const MAX_IMAGE_PIXELS = 4096 * 4096

const DATA_URL = /^data:image\/(png|jpeg|jpg);base64,/i

/**
 * Decode `data:image/png;base64,...` or `data:image/jpeg;base64,...` (or bare base64; the format is
 * sniffed from the bytes) into RGB. Alpha is composited over white.
 * @throws BadImageError when the text is not base64 of a PNG or JPEG.
 */
export function decodeImage(input: string): RgbImage {
  const b64 = input.replace(DATA_URL, '')
  if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(b64) || b64.trim().length === 0) {
    throw new BadImageError('image must be a data:image/png or data:image/jpeg base64 URL')
  }
  const bytes = Buffer.from(b64, 'base64')
  if (bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) {
    return decodePng(bytes)
  }
  if (bytes[0] === 0xff && bytes[1] === 0xd8) {
    return decodeJpeg(bytes)
  }
  throw new BadImageError('image is neither a PNG nor a JPEG')
}

function decodePng(bytes: Buffer): RgbImage {
  // Check the IHDR size before inflating, so a small file cannot claim gigabytes of pixels.
  if (bytes.length >= 24) {
    checkSize(bytes.readUInt32BE(16), bytes.readUInt32BE(20))
  }
  let png: { width: number; height: number; data: Buffer }
  try {
    png = PNG.sync.read(bytes)
  } catch (e) {
    throw new BadImageError(`unreadable PNG: ${e instanceof Error ? e.message : String(e)}`)
  }
  return fromRgba(png.width, png.height, png.data)
}

function decodeJpeg(bytes: Buffer): RgbImage {
  let img: { width: number; height: number; data: Uint8Array }
  try {
    img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: MAX_IMAGE_PIXELS / 1e6 })
  } catch (e) {
    throw new BadImageError(`unreadable JPEG: ${e instanceof Error ? e.message : String(e)}`)
  }
  return fromRgba(img.width, img.height, img.data)
}

function checkSize(width: number, height: number): void {
  if (width < 1 || height < 1 || width * height > MAX_IMAGE_PIXELS) {
    throw new BadImageError(`image is ${width}x${height}; at most ${MAX_IMAGE_PIXELS} pixels`)
  }
}

function fromRgba(width: number, height: number, rgba: Uint8Array): RgbImage {
  checkSize(width, height)
  const data = new Uint8Array(width * height * 3)
  for (let p = 0, q = 0; p < width * height; p++, q += 4) {
    const a = at(rgba, q + 3) / 255
    data[p * 3] = Math.round(at(rgba, q) * a + 255 * (1 - a))
    data[p * 3 + 1] = Math.round(at(rgba, q + 1) * a + 255 * (1 - a))
    data[p * 3 + 2] = Math.round(at(rgba, q + 2) * a + 255 * (1 - a))
  }
  return { width, height, data }
}

/** An axis-aligned region of an image, in pixels (may extend past the edges; samples are clamped). */
export interface Rect {
  x: number
  y: number
  w: number
  h: number
}

/**
 * Bilinear resample of `rect` of `img` to `outW` x `outH` (OpenCV's half-pixel convention), calling
 * `put(x, y, r, g, b)` for every output pixel. Used to resize whole images and to cut crops.
 */
export function sampleBilinear(img: RgbImage, rect: Rect, outW: number, outH: number, put: (x: number, y: number, r: number, g: number, b: number) => void): void {
  const sx = rect.w / outW
  const sy = rect.h / outH
  const { width, height, data } = img
  for (let y = 0; y < outH; y++) {
    const fy = Math.min(Math.max(rect.y + (y + 0.5) * sy - 0.5, 0), height - 1)
    const y0 = Math.floor(fy)
    const y1 = Math.min(y0 + 1, height - 1)
    const wy = fy - y0
    for (let x = 0; x < outW; x++) {
      const fx = Math.min(Math.max(rect.x + (x + 0.5) * sx - 0.5, 0), width - 1)
      const x0 = Math.floor(fx)
      const x1 = Math.min(x0 + 1, width - 1)
      const wx = fx - x0
      const a = (y0 * width + x0) * 3
      const b = (y0 * width + x1) * 3
      const c = (y1 * width + x0) * 3
      const d = (y1 * width + x1) * 3
      const ch = (k: number) => (at(data, a + k) * (1 - wx) + at(data, b + k) * wx) * (1 - wy) + (at(data, c + k) * (1 - wx) + at(data, d + k) * wx) * wy
      put(x, y, ch(0), ch(1), ch(2))
    }
  }
}
