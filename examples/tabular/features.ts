/**
 * The tabular example's feature code: Titanic-like passenger rows -> a normalised FP32 feature
 * vector (numeric normalisation + categorical vocabularies as one-hot blocks), and logits -> a
 * label with its probability. Used by the pipeline's stages and by the single-module baseline of
 * the benchmark, so both compute exactly the same thing.
 * @module
 */
import { Type, type Static } from '@sinclair/typebox'

/** One request item (Cog-style JSON input). */
export const Passenger = Type.Object({
  pclass: Type.Integer({ minimum: 1, maximum: 3, description: 'ticket class' }),
  sex: Type.String({ description: 'male | female (vocabulary)' }),
  age: Type.Number({ default: 28, description: 'years; missing -> the median 28' }),
  sibsp: Type.Integer({ minimum: 0, default: 0 }),
  parch: Type.Integer({ minimum: 0, default: 0 }),
  fare: Type.Number({ minimum: 0, default: 14.45 }),
  embarked: Type.String({ default: 'S', description: 'S | C | Q (vocabulary)' }),
})
export type Passenger = Static<typeof Passenger>

/** One output item. */
export const Prediction = Type.Object({
  label: Type.Union([Type.Literal('survived'), Type.Literal('died')]),
  probability: Type.Number(),
})
export type Prediction = Static<typeof Prediction>

/** Categorical vocabularies: each value gets one slot of a one-hot block. */
export const VOCAB = {
  pclass: ['1', '2', '3'],
  sex: ['male', 'female'],
  embarked: ['S', 'C', 'Q'],
} as const

/** Numeric normalisation (mean, std) of the training set (Titanic-like statistics). */
export const NUMERIC = {
  age: { mean: 29.7, std: 14.5 },
  sibsp: { mean: 0.52, std: 1.1 },
  parch: { mean: 0.38, std: 0.81 },
  logFare: { mean: 2.96, std: 0.97 },
} as const

/** Length of the feature vector: one-hot blocks + numeric features. */
export const FEATURES = VOCAB.pclass.length + VOCAB.sex.length + VOCAB.embarked.length + Object.keys(NUMERIC).length

/** Thrown for a value outside a vocabulary or range; the stage turns it into a 422 for that row. */
export class RowError extends Error {
  override name = 'RowError'
}

function oneHot(out: Float32Array, at: number, vocab: readonly string[], v: string, field: string): number {
  const k = vocab.indexOf(v)
  if (k < 0) {
    throw new RowError(`${field} "${v}" is not in the vocabulary (${vocab.join(', ')})`)
  }
  out[at + k] = 1
  return at + vocab.length
}

const z = (v: number, s: { mean: number; std: number }) => (v - s.mean) / s.std

/** One row -> its feature vector. @throws RowError for a value no vocabulary or range accepts. */
export function featurize(p: Passenger): Float32Array {
  if (!(p.age >= 0 && p.age < 130)) {
    throw new RowError(`age ${p.age} is out of range [0, 130)`)
  }
  const out = new Float32Array(FEATURES)
  let at = oneHot(out, 0, VOCAB.pclass, String(p.pclass), 'pclass')
  at = oneHot(out, at, VOCAB.sex, p.sex, 'sex')
  at = oneHot(out, at, VOCAB.embarked, p.embarked, 'embarked')
  out[at++] = z(p.age, NUMERIC.age)
  out[at++] = z(p.sibsp, NUMERIC.sibsp)
  out[at++] = z(p.parch, NUMERIC.parch)
  out[at++] = z(Math.log1p(p.fare), NUMERIC.logFare)
  return out
}

/** Two logits (died, survived) -> label and softmax probability of that label. */
export function decide(logits: ArrayLike<number>): Prediction {
  const d = logits[0] ?? 0
  const s = logits[1] ?? 0
  const m = Math.max(d, s)
  const ps = Math.exp(s - m) / (Math.exp(s - m) + Math.exp(d - m))
  return ps >= 0.5 ? { label: 'survived', probability: ps } : { label: 'died', probability: 1 - ps }
}
