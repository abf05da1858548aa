/**
 * Postprocessing for the text classifier: softmax over the logits, then the top-k labels.
 * @module
 */
import { LABELS } from './synthetic.ts'

/** One ranked label. */
export interface LabelScore {
  readonly label: string
  /** Softmax probability, rounded to {@link SCORE_DIGITS} decimals. */
  readonly score: number
}

/** Decimals kept in scores (the logits are exact, see classifier.ts, so scores are reproducible anyway). */
export const SCORE_DIGITS = 6

/** Numerically stable softmax (in float64). */
export function softmax(logits: ArrayLike<number>): number[] {
  let max = -Infinity
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i] as number)
  const exps = Array.from({ length: logits.length }, (_, i) => Math.exp((logits[i] as number) - max))
  const sum = exps.reduce((a, b) => a + b, 0)
  return exps.map((e) => e / sum)
}

/**
 * The `k` most probable labels, best first (ties keep label order).
 * @param labels names of the logits, in order
 * @throws RangeError when there are not as many logits as labels, or `k` is not in 1..labels
 */
export function topK(logits: ArrayLike<number>, k: number, labels: readonly string[] = LABELS): LabelScore[] {
  if (logits.length !== labels.length) throw new RangeError(`expected ${labels.length} logits, got ${logits.length}`)
  if (!Number.isInteger(k) || k < 1 || k > labels.length) throw new RangeError(`top_k must be 1..${labels.length}, got ${k}`)
  const scale = 10 ** SCORE_DIGITS
  return softmax(logits)
    .map((p, i) => ({ label: labels[i] as string, score: Math.round(p * scale) / scale, p, i }))
    .sort((a, b) => b.p - a.p || a.i - b.i)
    .slice(0, k)
    .map(({ label, score }) => ({ label, score }))
}
