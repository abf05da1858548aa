/**
 * Text recognition around PaddleOCR v4's CRNN/SVTR model: crops resized to height 48 and padded to
 * a few width buckets (so crops of similar width batch together), and CTC greedy decoding with the
 * model package's key file. Pure functions.
 * @module
 */
import { at } from './at.ts'
import type { Box } from './det.ts'
import { sampleBilinear, type RgbImage } from './image.ts'

/** Height of the recogniser's input. */
export const REC_HEIGHT = 48

/** Default width buckets of recognition crops, in pixels (the last is the widest; wider crops are squeezed). */
export const DEFAULT_WIDTH_BUCKETS: readonly number[] = [128, 256, 384, 512, 768, 1024]

/** The recogniser's input for one crop: `[3, 48, bucket]` FP32, BGR in [-1, 1], zero-padded on the right. */
export interface RecInput {
  data: Float32Array
  shape: [3, number, number]
}

/** The smallest bucket that holds `width`, or the widest bucket. */
export function widthBucket(width: number, buckets: readonly number[] = DEFAULT_WIDTH_BUCKETS): number {
  if (buckets.length === 0) {
    throw new RangeError('width buckets must not be empty')
  }
  for (const b of buckets) {
    if (width <= b) {
      return b
    }
  }
  return at(buckets, buckets.length - 1)
}

/** Cut `box` out of `img`, resize it to height 48 (keeping its aspect ratio) and pad it to its width bucket. */
export function recInput(img: RgbImage, box: Box, buckets: readonly number[] = DEFAULT_WIDTH_BUCKETS): RecInput {
  const x0 = box[0][0]
  const y0 = box[0][1]
  const w = Math.max(1, box[2][0] - x0)
  const h = Math.max(1, box[2][1] - y0)
  const natural = Math.max(1, Math.ceil((REC_HEIGHT * w) / h))
  const bucket = widthBucket(natural, buckets)
  const outW = Math.min(natural, bucket)
  const data = new Float32Array(3 * REC_HEIGHT * bucket)
  const plane = REC_HEIGHT * bucket
  sampleBilinear(img, { x: x0, y: y0, w, h }, outW, REC_HEIGHT, (x, y, r, g, b) => {
    const i = y * bucket + x
    data[i] = b / 127.5 - 1
    data[plane + i] = g / 127.5 - 1
    data[2 * plane + i] = r / 127.5 - 1
  })
  return { data, shape: [3, REC_HEIGHT, bucket] }
}

/**
 * The recogniser's classes from the key file's text: index 0 is the CTC blank, then one class per
 * line of the file, then a space (PaddleOCR's `use_space_char`).
 */
export function charset(keys: string): string[] {
  const lines = keys.split(/\r?\n/)
  if (lines.at(-1) === '') {
    lines.pop()
  }
  return ['', ...lines, ' ']
}

/** A decoded line of text and its confidence (mean probability of the kept characters; 0 when empty). */
export interface Decoded {
  text: string
  score: number
}

/**
 * CTC greedy decoding of `[t, classes]` probabilities: the best class per step, repeats collapsed,
 * blanks (class 0) dropped.
 */
export function ctcDecode(probs: Float32Array, steps: number, chars: readonly string[]): Decoded {
  const classes = chars.length
  if (probs.length !== steps * classes) {
    throw new RangeError(`expected ${steps} x ${classes} probabilities, got ${probs.length}`)
  }
  let text = ''
  let sum = 0
  let kept = 0
  let prev = -1
  for (let t = 0; t < steps; t++) {
    let best = 0
    let bestP = -Infinity
    const row = t * classes
    for (let c = 0; c < classes; c++) {
      const p = at(probs, row + c)
      if (p > bestP) {
        bestP = p
        best = c
      }
    }
    if (best !== 0 && best !== prev) {
      text += at(chars, best)
      sum += bestP
      kept++
    }
    prev = best
  }
  return { text, score: kept === 0 ? 0 : sum / kept }
}
