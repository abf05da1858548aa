/**
 * Output text of one generation, built incrementally from its tokens: bytes of a character split
 * across tokens are held until complete, and text that could be the start of a stop string is
 * held until it is known not to be (stop strings also match across token boundaries).
 * @module
 */

/** What the engine needs of a tokenizer. */
export interface Tokenizer {
  encode(text: string): number[]
  /** Text of a run of tokens; an incomplete UTF-8 sequence at the end decodes to U+FFFD. */
  decode(tokens: readonly number[]): string
  /** The UTF-8 bytes of one token (logprobs). @default the UTF-8 encoding of `decode([token])` */
  tokenBytes?(token: number): number[]
}

const utf8 = new TextEncoder()

/** One token's text alone and its bytes, as logprobs show them. */
export function tokenPiece(tok: Tokenizer, token: number): { text: string; bytes: number[] } {
  const text = tok.decode([token])
  return { text, bytes: tok.tokenBytes ? tok.tokenBytes(token) : Array.from(utf8.encode(text)) }
}

/** Each tokenizer's text of single tokens, as decoded once (a token's text never changes; bounded by the vocabulary). */
const pieces = new WeakMap<Tokenizer, Map<number, string>>()

/** `tok.decode([token])`, memoised. */
function decodeOne(tok: Tokenizer, token: number): string {
  let m = pieces.get(tok)
  if (!m) {
    m = new Map()
    pieces.set(tok, m)
  }
  let t = m.get(token)
  if (t === undefined) {
    t = tok.decode([token])
    m.set(token, t)
  }
  return t
}

/** Tokens held at most while their text ends in U+FFFD (an incomplete character), before it is taken as is. */
const MAX_PENDING = 4

/** Incremental text of one generation with stop-string matching. */
export class OutputText {
  readonly #tok: Tokenizer
  readonly #stops: readonly string[]
  /** Decoded text so far (complete characters). */
  #text = ''
  /** Tokens not yet decoded into `#text` (an incomplete character). */
  #pending: number[] = []
  /** Characters of `#text` handed out by `take()`. */
  #sent = 0
  /** Index of the first stop-string match, once found. */
  stoppedAt: number | undefined

  constructor(tokenizer: Tokenizer, stops: readonly string[]) {
    this.#tok = tokenizer
    this.#stops = stops.filter((s) => s.length > 0)
  }

  /** Adds one token; returns true when a stop string is now complete. */
  push(token: number): boolean {
    if (this.stoppedAt !== undefined) return true
    this.#pending.push(token)
    const piece = this.#pending.length === 1 ? decodeOne(this.#tok, token) : this.#tok.decode(this.#pending)
    if (piece.endsWith('\uFFFD') && this.#pending.length < MAX_PENDING) return false
    const from = Math.max(0, this.#text.length - this.#longestStop() + 1)
    this.#text += piece
    this.#pending = []
    let hit: number | undefined
    for (const s of this.#stops) {
      const i = this.#text.indexOf(s, from)
      if (i >= 0 && (hit === undefined || i < hit)) hit = i
    }
    if (hit !== undefined) {
      this.stoppedAt = hit
      this.#text = this.#text.slice(0, hit)
      return true
    }
    return false
  }

  #longestStop(): number {
    let m = 0
    for (const s of this.#stops) m = Math.max(m, s.length)
    return m
  }

  /** Text safe to send now: all of it but a suffix that may begin a stop string (all of it when `final`). */
  take(final = false): string {
    let end = this.#text.length
    if (!final && this.stoppedAt === undefined) {
      for (const s of this.#stops) {
        for (let k = Math.min(s.length - 1, end - this.#sent); k > 0; k--) {
          if (this.#text.endsWith(s.slice(0, k))) {
            end = Math.min(end, this.#text.length - k)
            break
          }
        }
      }
    }
    if (final && this.#pending.length > 0 && this.stoppedAt === undefined) {
      this.#text += this.#tok.decode(this.#pending)
      this.#pending = []
      end = this.#text.length
    }
    if (end <= this.#sent) return ''
    const out = this.#text.slice(this.#sent, end)
    this.#sent = end
    return out
  }

  /** The whole output text so far (without a matched stop string). */
  get text(): string {
    return this.#text
  }
}
