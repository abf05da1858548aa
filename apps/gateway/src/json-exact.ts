/**
 * Exact 64-bit integers in Open Inference Protocol JSON: clients such as tritonclient write INT64 and
 * UINT64 data as plain JSON numbers, which `JSON.parse` rounds beyond 2^53. These helpers keep
 * such literals exact on the way in (as decimal strings) and write them as bare numbers on the way out.
 * @module
 */

/** An integer literal too large for a double, kept as its decimal text. */
export class BigLiteral {
  constructor(readonly text: string) {}
}

const MARK = '$cohort_big'

/**
 * Whether `text` holds 16 digits in a row (one pass; `/\d{16}/` tried 16 digits from every digit,
 * about 4x JSON.parse's own time on a body of 64 floats, issue 28).
 */
export function hasLongDigits(text: string): boolean {
  let run = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0x30 && c <= 0x39) {
      if (++run >= 16) {
        return true
      }
    } else {
      run = 0
    }
  }
  return false
}

/**
 * `JSON.parse`, except integer literals outside the safe range become {@link BigLiteral}s (any
 * number with 16+ digits takes a slower scanning path; other bodies parse as usual). Throws
 * SyntaxError as JSON.parse does.
 */
export function parseJsonExact(text: string): { value: unknown; hasBig: boolean } {
  if (!hasLongDigits(text)) {
    return { value: JSON.parse(text), hasBig: false }
  }
  let out = ''
  let last = 0
  let hasBig = false
  const n = text.length
  for (let i = 0; i < n; i++) {
    const ch = text.charCodeAt(i)
    if (ch === 0x22 /* " */) {
      // Skip the string, honouring escapes.
      for (i++; i < n; i++) {
        const c = text.charCodeAt(i)
        if (c === 0x5c /* \ */) {
          i++
        } else if (c === 0x22) {
          break
        }
      }
    } else if (ch === 0x2d /* - */ || (ch >= 0x30 && ch <= 0x39)) {
      const digitsEnd = skipDigits(text, i + 1)
      // The whole literal: fraction and exponent belong to it (never a separate number).
      let j = digitsEnd
      if (text.charCodeAt(j) === 0x2e /* . */) {
        j = skipDigits(text, j + 1)
      }
      if ((text.charCodeAt(j) | 0x20) === 0x65 /* e or E */) {
        const sign = text.charCodeAt(j + 1)
        j = skipDigits(text, sign === 0x2b || sign === 0x2d ? j + 2 : j + 1)
      }
      const lit = text.slice(i, j)
      if (j === digitsEnd && lit.length >= 16 && !Number.isSafeInteger(Number(lit))) {
        out += text.slice(last, i) + `{"${MARK}":"${lit}"}`
        last = j
        hasBig = true
      }
      i = j - 1
    }
  }
  if (!hasBig) {
    return { value: JSON.parse(text), hasBig: false }
  }
  out += text.slice(last)
  const value: unknown = JSON.parse(out, (_k, v: unknown) => {
    const mark = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>)[MARK] : undefined
    return typeof mark === 'string' ? new BigLiteral(mark) : v
  })
  return { value, hasBig }
}

function skipDigits(text: string, j: number): number {
  while (j < text.length && text.charCodeAt(j) >= 0x30 && text.charCodeAt(j) <= 0x39) {
    j++
  }
  return j
}

/**
 * Replace the {@link BigLiteral}s in tensor `data`: decimal strings for INT64/UINT64 (which
 * accept them exactly), plain numbers otherwise (what JSON.parse would have given).
 */
export function exactData(data: unknown, datatype: string): unknown {
  if (data instanceof BigLiteral) {
    return datatype === 'INT64' || datatype === 'UINT64' ? data.text : Number(data.text)
  }
  if (Array.isArray(data)) {
    return data.map((d) => exactData(d, datatype))
  }
  return data
}

/**
 * `JSON.stringify(doc)` where `raw` maps marker strings (placed in `doc` instead of arrays) to
 * JSON text written as is: used for INT64/UINT64 output data written as exact bare integers.
 */
export function stringifyWithRaw(doc: unknown, raw: Map<string, string>): string {
  let s = JSON.stringify(doc)
  for (const [marker, text] of raw) {
    s = s.replace(JSON.stringify(marker), () => text)
  }
  return s
}
