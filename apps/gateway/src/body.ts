import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { AbortSignalLike } from '@cohort/transport'
import type { ResolvedGatewayOptions } from './options.ts'

/** The request body through the runtime adapter when it has a reader, else the Web Request. */
export function bodyOf(c: Context, o: ResolvedGatewayOptions, max = o.maxBodyBytes): Promise<Uint8Array> {
  return o.adapter?.readBody ? o.adapter.readBody(c, max) : readBody(c.req.raw, max)
}

/** The client-disconnect signal through the runtime adapter when it has one. */
export function clientGone(c: Context, o: ResolvedGatewayOptions): AbortSignalLike | undefined {
  return o.adapter?.clientGone ? o.adapter.clientGone(c) : c.req.raw.signal
}

/** Read a request body up to `max` bytes (413 beyond), checking Content-Length first. */
export async function readBody(req: Request, max: number): Promise<Uint8Array> {
  const len = req.headers.get('content-length')
  if (len !== null && Number(len) > max) {
    throw new CohortError('PAYLOAD_TOO_LARGE', `request body of ${len} bytes exceeds the limit of ${max} bytes`)
  }
  if (!req.body) {
    return new Uint8Array(0)
  }
  if (len !== null) {
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
    chunks.push(value)
  }
  if (chunks.length === 1) {
    return chunks[0]!
  }
  const out = new Uint8Array(total)
  let o = 0
  for (const c of chunks) {
    out.set(c, o)
    o += c.byteLength
  }
  return out
}

/** Parse JSON bytes or answer 400 with the parser's message. */
export function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes))
  } catch (e) {
    throw new CohortError('BAD_REQUEST', `body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
}
