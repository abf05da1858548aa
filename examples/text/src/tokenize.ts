/**
 * Preprocessing for the text classifier: GPT-2 BPE tokenisation (the `gpt-tokenizer` package,
 * r50k_base ranks bundled, nothing downloaded), truncation, and padding to a length bucket with an
 * attention mask. Items in the same bucket have the same shape, so they can share a batch and pay
 * only for the bucket's length, not for the longest text of the whole batch.
 * @module
 */
import { encode, vocabularySize } from 'gpt-tokenizer/encoding/r50k_base'

/** Size of the tokenizer's vocabulary (rows of the classifier's embedding table). */
export const VOCAB_SIZE: number = vocabularySize

/** Most tokens kept per text by default; longer texts are truncated. */
export const DEFAULT_MAX_TOKENS = 64

/** Shortest bucket by default. */
export const DEFAULT_MIN_BUCKET = 8

/** Token id written at padding positions (masked out, so any valid id works). */
export const PAD_ID = 0

// Special tokens such as "<|endoftext|>" in user text are encoded as plain text, never rejected.
const NO_SPECIAL = { disallowedSpecial: new Set<string>() }

/**
 * GPT-2 BPE token ids of `text`, truncated to `maxTokens`.
 * @returns the ids (possibly empty for an empty text)
 */
export function tokenize(text: string, maxTokens = DEFAULT_MAX_TOKENS): number[] {
  const ids = encode(text, NO_SPECIAL)
  return ids.length > maxTokens ? ids.slice(0, maxTokens) : ids
}

/**
 * The padded length for `n` tokens: the smallest power of two >= n, at least `minBucket`, at most
 * `maxTokens` (which is a bucket of its own when it is not a power of two).
 */
export function bucketLength(n: number, maxTokens = DEFAULT_MAX_TOKENS, minBucket = DEFAULT_MIN_BUCKET): number {
  let b = minBucket
  while (b < n && b < maxTokens) b *= 2
  return Math.min(b, maxTokens)
}

/** One text as model input, without the batch dimension. */
export interface EncodedText {
  /** Token ids padded with {@link PAD_ID} to `bucket`. */
  readonly inputIds: BigInt64Array
  /** 1 for real tokens, 0 for padding. */
  readonly attentionMask: BigInt64Array
  /** Real tokens (after truncation). */
  readonly length: number
}

/** Options of {@link encodeText}. */
export interface EncodeTextOptions {
  /** Tokens kept per text. @default 64 */
  readonly maxTokens?: number
  /** Shortest bucket. @default 8 */
  readonly minBucket?: number
  /** Pad to exactly this length instead of the bucket (for tests: "the same item, padded more"). */
  readonly padTo?: number
}

/**
 * Tokenises, truncates and pads one text to its length bucket.
 * @throws RangeError when the text has no tokens, or `padTo` is shorter than the tokens
 */
export function encodeText(text: string, opts: EncodeTextOptions = {}): EncodedText {
  const { maxTokens = DEFAULT_MAX_TOKENS, minBucket = DEFAULT_MIN_BUCKET } = opts
  const ids = text.trim() === '' ? [] : tokenize(text, maxTokens)
  if (ids.length === 0) throw new RangeError('text has no tokens')
  const len = opts.padTo ?? bucketLength(ids.length, maxTokens, minBucket)
  if (len < ids.length) throw new RangeError(`padTo ${len} is shorter than ${ids.length} tokens`)
  const inputIds = new BigInt64Array(len).fill(BigInt(PAD_ID))
  const attentionMask = new BigInt64Array(len)
  ids.forEach((id, i) => {
    inputIds[i] = BigInt(id)
    attentionMask[i] = 1n
  })
  return { inputIds, attentionMask, length: ids.length }
}
