import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Context } from 'hono'
import { readBody, type GatewayAdapter } from '@cohort/gateway'
import { CohortError } from '@cohort/protocol'
import type { AbortSignalLike } from '@cohort/transport'
import { LoopLag } from './loop-lag.ts'

interface NodeBindings {
  incoming?: IncomingMessage
  outgoing?: ServerResponse
}

/** Aborts when the response closes before it finished: the client went away. */
class ResponseGoneSignal implements AbortSignalLike {
  aborted = false
  #fns: (() => void)[] = []
  constructor(res: ServerResponse) {
    res.once('close', () => {
      if (!res.writableFinished) {
        this.aborted = true
        for (const fn of this.#fns.splice(0)) {
          fn()
        }
      }
    })
  }
  addEventListener(_type: 'abort', fn: () => void): void {
    this.#fns.push(fn)
  }
  removeEventListener(_type: 'abort', fn: () => void): void {
    const i = this.#fns.indexOf(fn)
    if (i >= 0) {
      this.#fns.splice(i, 1)
    }
  }
}

function readIncoming(inc: IncomingMessage, max: number): Promise<Uint8Array> {
  const len = inc.headers['content-length']
  if (len !== undefined && Number(len) > max) {
    return Promise.reject(new CohortError('PAYLOAD_TOO_LARGE', `request body of ${len} bytes exceeds the limit of ${max} bytes`))
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let total = 0
    inc.on('data', (d: Buffer) => {
      total += d.length
      if (total > max) {
        inc.removeAllListeners('data')
        inc.resume()
        reject(new CohortError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${max} bytes`))
        return
      }
      chunks.push(d)
    })
    inc.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total)))
    inc.once('error', reject)
  })
}

/**
 * The Node fast paths of the gateway: read the body straight from `IncomingMessage` and watch the
 * `ServerResponse` for a client that went away, instead of building Web streams and AbortSignals.
 */
export const nodeAdapter: GatewayAdapter = {
  readBody(c: Context, max: number) {
    const inc = (c.env as NodeBindings | undefined)?.incoming
    return inc ? readIncoming(inc, max) : readBody(c.req.raw, max)
  },
  clientGone(c: Context) {
    const out = (c.env as NodeBindings | undefined)?.outgoing
    return out ? new ResponseGoneSignal(out) : c.req.raw.signal
  },
  clientAddress(c: Context) {
    return (c.env as NodeBindings | undefined)?.incoming?.socket?.remoteAddress
  },
}

let loopLag: LoopLag | undefined

/**
 * The Node adapter for `cohort serve`/`cohort gateway`: {@link nodeAdapter}, plus front-door
 * admission (the event loop's delay as each request's queueing delay) unless `--no-front-door`.
 * One sampler per process, shared by every app (its timer is unref'd).
 */
export function gatewayAdapter(v: Record<string, unknown>): GatewayAdapter {
  if (v['no-front-door'] === true) {
    return nodeAdapter
  }
  const lag = (loopLag ??= new LoopLag())
  return { ...nodeAdapter, queueDelayMs: () => lag.current() }
}
