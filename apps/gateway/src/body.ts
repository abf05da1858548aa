import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { AbortSignalLike } from '@cohort/transport'
import type { ResolvedGatewayOptions } from './options.ts'
import { closesConnection } from './refusal.ts'
import { headerOf } from './request-header.ts'

/** One decoder for every body (decoding is stateless without `stream`; one per request was an allocation each). */
export const UTF8 = new TextDecoder()

/** Counts the body bytes of one admitted request as they are read (the in-flight bound). */
export interface BodyTicket {
  /** True when the request declared its length (already counted in full at admission). */
  readonly declared: boolean
  /** Count `n` more bytes; throws 503 OVERLOADED past the gateway's bound. */
  take(n: number): void
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's in-flight ticket (middleware/inflight), read by {@link bodyOf}. */
    cohortBodyTicket: BodyTicket | undefined
    /** A route started to read the body (the connection rule of refusals applies to the others). */
    cohortBodyRead: boolean | undefined
  }
}

// Per-request state lives on the request's Context, not in a WeakMap keyed by its Request: V8's
// scavenger treats a WeakMap's values as strong, so a value holding the request kept every
// request's objects alive through the next young-generation GC and into the old generation
// (docs/bench/gc-2026-12-03.md: 1.7 MB promoted per scavenge at 200 requests/s, 4-5 ms scavenges).

/** True once the request's body was asked for through {@link bodyOf}. */
export function bodyWasRead(c: Context): boolean {
  return c.get('cohortBodyRead') === true
}

/**
 * The connection rule of an answer given before the body was read ({@link closesConnection}):
 * `Connection: close` for an unread body over 64 KiB or of unknown length, nothing otherwise.
 */
export function closeIfBodyUnread(c: Context): void {
  if (c.get('cohortBodyRead') !== true && closesConnection(c.req.method, headerOf(c, 'content-length'), headerOf(c, 'transfer-encoding'))) {
    c.header('connection', 'close')
  }
}

/** Attach a request's in-flight ticket (middleware/inflight). */
export function setBodyTicket(c: Context, t: BodyTicket): void {
  c.set('cohortBodyTicket', t)
}

/** A length header's value: ASCII digits only, at most 15 (below 2^53). */
export const DECIMAL_LENGTH = /^[0-9]{1,15}$/

/**
 * A length header's value as a non-negative integer: ASCII digits only (no sign, hex, exponent,
 * fraction or spaces), at most 15 of them. `undefined` when absent.
 * @throws CohortError BAD_REQUEST naming the header otherwise.
 */
export function parseLengthHeader(name: string, v: string | null | undefined): number | undefined {
  if (v === null || v === undefined) {
    return undefined
  }
  if (!DECIMAL_LENGTH.test(v)) {
    throw new CohortError('BAD_REQUEST', `${name} must be a decimal integer of bytes, got ${JSON.stringify(v.slice(0, 40))}`)
  }
  return Number(v)
}

/** The request's declared `Content-Length`, strictly parsed. */
export function declaredLength(v: string | null | undefined): number | undefined {
  return parseLengthHeader('Content-Length', v)
}

/** The request body through the runtime adapter when it has a reader, else the Web Request. */
export function bodyOf(c: Context, o: ResolvedGatewayOptions, max = o.maxBodyBytes): Promise<Uint8Array> {
  c.set('cohortBodyRead', true)
  const t = c.get('cohortBodyTicket')
  // A declared length was counted in full at admission; an undeclared one is counted as it arrives.
  const onChunk = t && !t.declared ? (n: number) => t.take(n) : undefined
  return o.adapter?.readBody ? o.adapter.readBody(c, max, onChunk) : readBody(c.req.raw, max, onChunk)
}

/** The client-disconnect signal through the runtime adapter when it has one. */
export function clientGone(c: Context, o: ResolvedGatewayOptions): AbortSignalLike | undefined {
  return o.adapter?.clientGone ? o.adapter.clientGone(c) : c.req.raw.signal
}

/**
 * Read a request body up to `max` bytes (413 beyond), checking Content-Length first; `onChunk`
 * sees each chunk's size of a body read in chunks (it may throw to stop reading).
 */
export async function readBody(req: Request, max: number, onChunk?: (n: number) => void): Promise<Uint8Array> {
  const len = declaredLength(req.headers.get('content-length'))
  if (len !== undefined && len > max) {
    throw new CohortError('PAYLOAD_TOO_LARGE', `request body of ${len} bytes exceeds the limit of ${max} bytes`)
  }
  if (!req.body) {
    return new Uint8Array(0)
  }
  if (len !== undefined) {
    // Known length within the limit: arrayBuffer() is much cheaper than a web stream on Node.
    const buf = await req.arrayBuffer()
    if (buf.byteLength > max) {
      throw new CohortError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${max} bytes`)
    }
    return new Uint8Array(buf)
  }
  const chunks: Uint8Array[] = []
  let total = 0
  const reader = req.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) {
      break
    }
    total += value.byteLength
    if (total > max) {
      await reader.cancel().catch(() => undefined)
      throw new CohortError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${max} bytes`)
    }
    try {
      onChunk?.(value.byteLength)
    } catch (e) {
      await reader.cancel().catch(() => undefined)
      throw e
    }
    chunks.push(value)
  }
  const [only] = chunks
  if (only !== undefined && chunks.length === 1) {
    return only
  }
  const out = new Uint8Array(total)
  let o = 0
  for (const c of chunks) {
    out.set(c, o)
    o += c.byteLength
  }
  return out
}

/**
 * Only a literal with a 3-digit exponent (`e+0*[1-9][0-9][0-9]`) or 309+ digits in a row can
 * overflow a double; a body without one (nearly all) skips the check. Text inside strings may match
 * too: that only costs the check. One pass over the text: the regular expression it replaces
 * (`/[eE]\+?0*[1-9][0-9]{2}|[0-9]{309}/`) tried 309 digits from every digit, about 4x JSON.parse's
 * own time on a body of 64 floats (issue 28).
 */
export function maybeHugeNumber(text: string): boolean {
  const n = text.length
  let run = 0
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0x30 && c <= 0x39) {
      if (++run >= 309) {
        return true
      }
      continue
    }
    run = 0
    if ((c | 0x20) === 0x65 /* e or E */) {
      let j = i + 1
      if (text.charCodeAt(j) === 0x2b /* + */) {
        j++
      }
      while (text.charCodeAt(j) === 0x30 /* 0*, so the next digit is 1-9 */) {
        j++
      }
      if (isDigit(text.charCodeAt(j)) && isDigit(text.charCodeAt(j + 1)) && isDigit(text.charCodeAt(j + 2))) {
        return true
      }
    }
  }
  return false
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39

/**
 * Whether a parsed JSON value holds a non-finite number: `JSON.parse` gives one only for a literal
 * beyond the double range (`1e400` becomes `Infinity`). A walk of the parsed value, without
 * recursion; on a body of 256 floats it costs about 1 µs where a scan of the text cost 20 µs, as
 * much as `JSON.parse` itself (issue 28).
 */
export function hasNonFinite(value: unknown): boolean {
  if (typeof value === 'number') {
    return !Number.isFinite(value)
  }
  if (typeof value !== 'object' || value === null) {
    return false
  }
  const stack: object[] = [value]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (Array.isArray(top)) {
      const items: unknown[] = top
      for (let i = 0; i < items.length; i++) {
        if (pending(items[i], stack)) {
          return true
        }
      }
    } else {
      // for-in, not Object.values: no array of values per object (JSON objects own every key).
      const o = top as Record<string, unknown>
      for (const k in o) {
        if (pending(o[k], stack)) {
          return true
        }
      }
    }
  }
  return false
}

/** True for a non-finite number; an object or array is pushed for the walk. */
function pending(v: unknown, stack: object[]): boolean {
  if (typeof v === 'number') {
    return !Number.isFinite(v)
  }
  if (typeof v === 'object' && v !== null) {
    stack.push(v)
  }
  return false
}

/**
 * Refuse JSON text holding a number literal beyond the double range (`1e400`, which `JSON.parse`
 * turns into `Infinity` and JSON cannot write back): 400 naming where it is. `parsed`: the text's
 * value, when the caller parsed it already (then only a body that holds such a number is parsed
 * again, to name where).
 * @throws CohortError BAD_REQUEST
 */
export function rejectNonFinite(text: string, parsed?: { value: unknown }): void {
  if (parsed ? !hasNonFinite(parsed.value) : !maybeHugeNumber(text)) {
    return
  }
  let where: string | undefined
  try {
    JSON.parse(text, function (this: unknown, key, v: unknown) {
      if (where === undefined && typeof v === 'number' && !Number.isFinite(v)) {
        where = key === '' ? 'the body' : `"${key.slice(0, 64)}"`
      }
      return v
    })
  } catch {
    return // not JSON: the caller's parser says so
  }
  if (where !== undefined) {
    throw new CohortError('BAD_REQUEST', `a number in ${where} is beyond the double range (about ±1.8e308); send finite numbers`)
  }
}

/** Parse JSON bytes or answer 400 with the parser's message (or for a number beyond the double range). */
export function parseJson(bytes: Uint8Array): unknown {
  const text = UTF8.decode(bytes)
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch (e) {
    throw new CohortError('BAD_REQUEST', `body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  rejectNonFinite(text, { value: v })
  return v
}
