/**
 * Tokenizers of the generative models: `'gpt2'` (gpt-tokenizer's GPT-2 encoding, r50k: 50257
 * tokens, `<|endoftext|>` = 50256; special-token text in a prompt is encoded as plain text) and
 * `'bytes'` (the tiny test decoder's: UTF-8 bytes 0-255, end-of-sequence 256).
 * @module
 */
import { BYTE_EOS, byteTokenizer, type Tokenizer } from '@cohort/generative'
import { decode, encode } from 'gpt-tokenizer/encoding/gpt2'

export type TokenizerName = 'gpt2' | 'bytes'

/** `<|endoftext|>` of GPT-2. */
export const GPT2_EOS = 50256

const NO_SPECIAL = { disallowedSpecial: new Set<string>() }

export const gpt2Tokenizer: Tokenizer = {
  encode: (text) => encode(text, NO_SPECIAL),
  decode: (tokens) => decode(tokens.filter((t) => t !== GPT2_EOS)),
}

export function tokenizerByName(name: TokenizerName): { tokenizer: Tokenizer; eosId: number; vocabSize: number } {
  return name === 'gpt2' ? { tokenizer: gpt2Tokenizer, eosId: GPT2_EOS, vocabSize: 50257 } : { tokenizer: byteTokenizer, eosId: BYTE_EOS, vocabSize: 257 }
}
