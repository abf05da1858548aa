/**
 * Text detection around PaddleOCR v4's DB model: the input tensor (resize to multiples of 32,
 * normalise) and the DB postprocess (threshold the probability map, connected components, boxes
 * with scores, unclip, filter small ones). Pure functions.
 * @module
 */
import { at } from './at.ts'
import { sampleBilinear, type RgbImage } from './image.ts'

/** Options of {@link detInput}. */
export interface DetInputOptions {
  /** Longest side of the detector's input in pixels; larger images are scaled down. @default 960 */
  maxSide?: number
}

/** The detector's input for one image: `[3, h, w]` FP32, BGR, normalised as PaddleOCR's det does. */
export interface DetInput {
  data: Float32Array
  shape: [3, number, number]
}

/** PaddleOCR det's NormalizeImage, applied (as PaddleOCR does) to B, G, R in that order. */
const MEAN = [0.485, 0.456, 0.406] as const
const STD = [0.229, 0.224, 0.225] as const
const DEFAULT_MAX_SIDE = 960

/** Input size for an image: scaled so the longest side is at most `maxSide`, each side a multiple of 32 (>= 32). */
export function detSize(width: number, height: number, maxSide = DEFAULT_MAX_SIDE): { w: number; h: number } {
  const ratio = Math.min(1, maxSide / Math.max(width, height))
  const round32 = (v: number) => Math.max(32, Math.round((v * ratio) / 32) * 32)
  return { w: round32(width), h: round32(height) }
}

/** Resize and normalise an image into the detector's `[3, h, w]` input. */
export function detInput(img: RgbImage, options: DetInputOptions = {}): DetInput {
  const { w, h } = detSize(img.width, img.height, options.maxSide)
  const data = new Float32Array(3 * h * w)
  const plane = h * w
  sampleBilinear(img, { x: 0, y: 0, w: img.width, h: img.height }, w, h, (x, y, r, g, b) => {
    const i = y * w + x
    data[i] = (b / 255 - MEAN[0]) / STD[0]
    data[plane + i] = (g / 255 - MEAN[1]) / STD[1]
    data[2 * plane + i] = (r / 255 - MEAN[2]) / STD[2]
  })
  return { data, shape: [3, h, w] }
}

/** Options of {@link dbBoxes}; defaults are PaddleOCR's DBPostProcess defaults. */
export interface DbOptions {
  /** Probability above which a map pixel is text. @default 0.3 */
  thresh?: number
  /** Minimum mean probability inside a box. @default 0.6 */
  boxThresh?: number
  /** How far a box grows: by area * ratio / perimeter on each side. @default 1.5 */
  unclipRatio?: number
  /** Boxes whose short side (in map pixels) is below this are dropped. @default 3 */
  minSize?: number
  /** At most this many components are considered (largest first). @default 1000 */
  maxCandidates?: number
}

/** A detected text box: 4 corners clockwise from top-left, `[x, y]` in pixels of the original image. */
export type Box = [[number, number], [number, number], [number, number], [number, number]]

/** One detection: its box and the mean text probability inside it. */
export interface Detection {
  box: Box
  score: number
}

interface Component {
  x0: number
  y0: number
  x1: number
  y1: number
  size: number
}

/** 8-connected components of `mask` (1 = text), with their bounding boxes. */
export function components(mask: Uint8Array, w: number, h: number): Component[] {
  const label = new Int32Array(w * h)
  const stack: number[] = []
  const out: Component[] = []
  for (let start = 0; start < w * h; start++) {
    if (mask[start] === 0 || label[start] !== 0) {
      continue
    }
    const c: Component = { x0: w, y0: h, x1: -1, y1: -1, size: 0 }
    label[start] = out.length + 1
    stack.push(start)
    for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
      const px = p % w
      const py = (p - px) / w
      c.size++
      c.x0 = Math.min(c.x0, px)
      c.x1 = Math.max(c.x1, px)
      c.y0 = Math.min(c.y0, py)
      c.y1 = Math.max(c.y1, py)
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const nx = px + dx
          const ny = py + dy
          if (nx < 0 || ny < 0 || nx >= w || ny >= h) {
            continue
          }
          const q = ny * w + nx
          if (mask[q] !== 0 && label[q] === 0) {
            label[q] = out.length + 1
            stack.push(q)
          }
        }
      }
    }
    out.push(c)
  }
  return out
}

/**
 * DB postprocess of a `mapH` x `mapW` probability map into boxes of a `srcW` x `srcH` image. Boxes
 * are axis-aligned (horizontal text); each is the component's bounding box, scored by the mean
 * probability inside it, grown by the unclip distance, scaled to the source and clipped to it.
 */
export function dbBoxes(prob: Float32Array, mapW: number, mapH: number, srcW: number, srcH: number, options: DbOptions = {}): Detection[] {
  const { thresh = 0.3, boxThresh = 0.6, unclipRatio = 1.5, minSize = 3, maxCandidates = 1000 } = options
  const mask = new Uint8Array(mapW * mapH)
  for (let i = 0; i < mask.length; i++) {
    mask[i] = at(prob, i) > thresh ? 1 : 0
  }
  const comps = components(mask, mapW, mapH)
    .sort((a, b) => b.size - a.size)
    .slice(0, maxCandidates)
  const out: Detection[] = []
  const sx = srcW / mapW
  const sy = srcH / mapH
  for (const c of comps) {
    const w = c.x1 - c.x0 + 1
    const h = c.y1 - c.y0 + 1
    if (Math.min(w, h) < minSize) {
      continue
    }
    let sum = 0
    for (let y = c.y0; y <= c.y1; y++) {
      for (let x = c.x0; x <= c.x1; x++) {
        sum += at(prob, y * mapW + x)
      }
    }
    const score = sum / (w * h)
    if (score < boxThresh) {
      continue
    }
    const d = (w * h * unclipRatio) / (2 * (w + h))
    if (Math.min(w, h) + 2 * d < minSize + 2) {
      continue
    }
    const x0 = clamp(Math.round((c.x0 - d) * sx), 0, srcW)
    const y0 = clamp(Math.round((c.y0 - d) * sy), 0, srcH)
    const x1 = clamp(Math.round((c.x1 + 1 + d) * sx), 0, srcW)
    const y1 = clamp(Math.round((c.y1 + 1 + d) * sy), 0, srcH)
    if (x1 - x0 < 1 || y1 - y0 < 1) {
      continue
    }
    out.push({
      box: [
        [x0, y0],
        [x1, y0],
        [x1, y1],
        [x0, y1],
      ],
      score,
    })
  }
  return out
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(Math.max(v, lo), hi)
}

/** Reading order: top-to-bottom, and left-to-right for boxes on the same line (tops within 10 px). */
export function readingOrder<T extends { box: Box }>(items: T[]): T[] {
  const sorted = [...items].sort((a, b) => a.box[0][1] - b.box[0][1] || a.box[0][0] - b.box[0][0])
  for (let i = 1; i < sorted.length; i++) {
    for (let j = i; j > 0; j--) {
      const a = at(sorted, j - 1)
      const b = at(sorted, j)
      if (Math.abs(b.box[0][1] - a.box[0][1]) < 10 && b.box[0][0] < a.box[0][0]) {
        sorted[j - 1] = b
        sorted[j] = a
      } else {
        break
      }
    }
  }
  return sorted
}
