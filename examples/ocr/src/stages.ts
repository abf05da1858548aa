/**
 * The OCR pipeline's TypeScript steps, as batch functions over plain values (typed arrays, no
 * classes), so a stage gives the same result fused or on another worker:
 *
 *   decode (data URL -> RGB + detector input) -> det (ONNX) -> boxes (DB postprocess + crops)
 *   -> rec (ONNX, one item per box, batched by width bucket) -> lines (CTC decode, reading order)
 * @module
 */
import { itemError, type ItemTensor } from '@cohort/pipeline'
import { at } from './at.ts'
import { dbBoxes, detInput, readingOrder, type Box, type DbOptions } from './det.ts'
import { BadImageError, decodeImage, type RgbImage } from './image.ts'
import { ctcDecode, recInput, DEFAULT_WIDTH_BUCKETS } from './rec.ts'

/** Input and output names of PaddleOCR v4's det and rec ONNX models. */
export const DET_INPUT = 'x'
export const DET_OUTPUT = 'sigmoid_0.tmp_0'
export const REC_INPUT = 'x'
export const REC_OUTPUT = 'softmax_11.tmp_0'

/** One request item (the pipeline's input schema, defaults applied). */
export interface OcrRequest {
  image: string
  /** Longest side of the detector's input. */
  maxSide: number
  /** Lines whose recognition score is below this are left out. */
  minScore: number
}

/** After `decode`: the RGB image, kept for cropping, and the detector's input. */
export interface Decoded {
  image: RgbImage
  det: Record<string, ItemTensor>
  minScore: number
}

/** After `det`: the image and the text probability map `[1, h, w]`. */
export interface Detected {
  image: RgbImage
  prob: ItemTensor
  minScore: number
}

/** After `boxes`: one box and one recogniser input per detected line. */
export interface Boxed {
  boxes: { box: Box; score: number }[]
  crops: Record<string, ItemTensor>[]
  minScore: number
}

/** One recognised line. */
export interface Line {
  text: string
  /** Recognition confidence in [0, 1]. */
  score: number
  /** Corners clockwise from top-left, `[x, y]` in pixels of the input image. */
  box: Box
}

/** The pipeline's output item. */
export interface OcrResult {
  lines: Line[]
}

/** `decode`: data URL -> RGB image and the detector's normalised input; a bad image fails its item (400). */
export function decodeItems(items: OcrRequest[]): (Decoded | Error)[] {
  return items.map((it) => {
    let image: RgbImage
    try {
      image = decodeImage(it.image)
    } catch (e) {
      if (e instanceof BadImageError) {
        return itemError(e.message, 'INVALID_INPUT')
      }
      throw e
    }
    const t = detInput(image, { maxSide: it.maxSide })
    return { image, det: { [DET_INPUT]: { datatype: 'FP32', shape: t.shape, data: t.data } }, minScore: it.minScore }
  })
}

/** `boxes`: DB postprocess of the probability map, then one crop per box at height 48, padded to its width bucket. */
export function boxItems(items: Detected[], options: DbOptions = {}, buckets = DEFAULT_WIDTH_BUCKETS): Boxed[] {
  return items.map(({ image, prob, minScore }) => {
    const [, h, w] = prob.shape as [number, number, number]
    const boxes = readingOrder(dbBoxes(prob.data as Float32Array, w, h, image.width, image.height, options))
    const crops = boxes.map((b) => {
      const t = recInput(image, b.box, buckets)
      return { [REC_INPUT]: { datatype: 'FP32' as const, shape: t.shape, data: t.data } }
    })
    return { boxes, crops, minScore }
  })
}

/** `lines`: CTC-decode each box's recognition, drop lines below `minScore`; boxes stay in reading order. */
export function mergeLines(item: Boxed, results: (Record<string, ItemTensor> | Error)[], chars: readonly string[]): OcrResult | Error {
  const lines: Line[] = []
  for (const [k, r] of results.entries()) {
    if (r instanceof Error) {
      return r
    }
    const y = r[REC_OUTPUT]
    if (!y) {
      return itemError(`recognition gave no ${REC_OUTPUT} output`, 'PREDICTOR_FAILED')
    }
    const steps = y.shape[0]
    if (steps === undefined) {
      return itemError(`recognition gave a ${REC_OUTPUT} output without dims`, 'PREDICTOR_FAILED')
    }
    const d = ctcDecode(y.data as Float32Array, steps, chars)
    if (d.text.trim().length > 0 && d.score >= item.minScore) {
      lines.push({ text: d.text, score: round(d.score), box: at(item.boxes, k).box })
    }
  }
  return { lines }
}

function round(v: number): number {
  return Math.round(v * 1e4) / 1e4
}
