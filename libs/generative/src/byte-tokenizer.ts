/**
 * The byte tokenizer of the tiny test decoder (`TINY_DECODER` of @cohort/onnx-builder): token
 * `b` (0-255) is the UTF-8 byte `b`, token 256 is end-of-sequence. Text of a run of tokens is the
 * UTF-8 decoding of its bytes (an incomplete character at the end decodes to U+FFFD, so the engine
 * holds it until it completes).
 * @module
 */
import type { Tokenizer } from './text.ts'

/** End-of-sequence token of the byte tokenizer. */
export const BYTE_EOS = 256

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export const byteTokenizer: Tokenizer = {
  encode: (text: string): number[] => Array.from(encoder.encode(text)),
  decode: (tokens: readonly number[]): string => decoder.decode(Uint8Array.from(tokens.filter((t) => t >= 0 && t < 256))),
  tokenBytes: (token: number): number[] => (token >= 0 && token < 256 ? [token] : []),
}
