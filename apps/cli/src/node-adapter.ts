import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Context } from 'hono'
import { declaredLength, readBody, type Admission, type EarlyDoor, type GatewayAdapter } from '@cohort/gateway'
import { CohortError } from '@cohort/protocol'
import type { AbortSignalLike } from '@cohort/transport'
import { LoopLag } from './loop-lag.ts'
import { arrivedAt } from './listener-bounds.ts'

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

/**
 * Read the body. With a declared length the bytes go straight into one buffer of that size, so a
 * body is held once (not chunks plus their concatenation); without one, chunks are counted with
 * `onChunk` and joined at the end.
 */
function readIncoming(inc: IncomingMessage, max: number, onChunk?: (n: number) => void): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    // A bad Content-Length throws here, which rejects the promise with that error.
    const len = declaredLength(inc.headers['content-length'])
    if (len !== undefined && len > max) {
      reject(new CohortError('PAYLOAD_TOO_LARGE', `request body of ${len} bytes exceeds the limit of ${max} bytes`))
      return
    }
    const whole = len !== undefined && len > 0 ? Buffer.allocUnsafe(len) : undefined
    const chunks: Buffer[] = []
    let total = 0
    const fail = (e: Error) => {
      inc.removeAllListeners('data')
      inc.resume()
      reject(e)
    }
    inc.on('data', (d: Buffer) => {
      total += d.length
      if (total > max || (whole && total > whole.length)) {
        fail(new CohortError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${max} bytes`))
        return
      }
      if (whole) {
        d.copy(whole, total - d.length)
        return
      }
      try {
        onChunk?.(d.length)
      } catch (e) {
        fail(e instanceof Error ? e : new CohortError('INTERNAL', 'counting the request body failed', { cause: e }))
        return
      }
      chunks.push(d)
    })
    inc.once('end', () => {
      if (whole) {
        resolve(total === whole.length ? whole : whole.subarray(0, total))
      } else {
        const only = chunks.length === 1 ? chunks[0] : undefined
        resolve(only ?? Buffer.concat(chunks, total))
      }
    })
    // The connection failed or was closed while the body was still arriving (the client went away,
    // or a shutdown cut off a client too slow to send it): a cancel, not an internal error.
    inc.once('error', (e: Error) => reject(new CohortError('CANCELLED', `the connection closed before the request body was received (${e.message})`, { cause: e })))
    // Node does not always emit 'error' for a body cut off by a closed socket (only 'close'): a
    // body that never completed is the same cancel (a settled promise ignores the second reject).
    inc.once('close', () => {
      if (!inc.complete) {
        reject(new CohortError('CANCELLED', 'the connection closed before the request body was received'))
      }
    })
  })
}

/**
 * The admission judged at the listener ({@link answerEarly}), for the route
 * ({@link GatewayAdapter.admission}): a property of the request, not a WeakMap entry (V8's young-
 * generation GC treats WeakMap values as strong, which kept every request's objects alive into the
 * old generation; listener-bounds.ts).
 */
const ADMISSION = Symbol('cohort.admission')
type Judged = IncomingMessage & { [ADMISSION]?: Admission }

/**
 * Judge `req` with the gateway's door at the listener (early.ts) before the app runs: a refusal is
 * written here in one `writeHead` + `end` (true: answered; Node drains the small unread body, so
 * the connection stays open), an admission is kept for the route. False: the app serves it.
 */
export function answerEarly(early: EarlyDoor, req: IncomingMessage, res: ServerResponse): boolean {
  const h = req.headers
  const at = arrivedAt(req)
  const d = early.judge({
    method: req.method ?? '',
    url: req.url ?? '',
    header: (name) => {
      const v = h[name]
      return typeof v === 'string' ? v : undefined
    },
    waitedMs: at === undefined ? undefined : performance.now() - at,
  })
  if (d === undefined) {
    return false
  }
  if (d.admission) {
    ;(req as Judged)[ADMISSION] = d.admission
    return false
  }
  const { status, headers, body } = d.answer
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) })
  res.end(body)
  return true
}

/**
 * The Node fast paths of the gateway: read the body straight from `IncomingMessage` and watch the
 * `ServerResponse` for a client that went away, instead of building Web streams and AbortSignals.
 */
export const nodeAdapter: GatewayAdapter = {
  readBody(c: Context, max: number, onChunk?: (n: number) => void) {
    const inc = (c.env as NodeBindings | undefined)?.incoming
    return inc ? readIncoming(inc, max, onChunk) : readBody(c.req.raw, max, onChunk)
  },
  clientGone(c: Context) {
    const out = (c.env as NodeBindings | undefined)?.outgoing
    return out ? new ResponseGoneSignal(out) : c.req.raw.signal
  },
  clientAddress(c: Context) {
    // Read as nullable: a request answered late may find its socket already detached.
    const socket: { remoteAddress?: string | undefined } | null | undefined = (c.env as NodeBindings | undefined)?.incoming?.socket
    return socket?.remoteAddress
  },
  arrivedAt(c: Context) {
    const inc = (c.env as NodeBindings | undefined)?.incoming
    return inc ? arrivedAt(inc) : undefined
  },
  admission(c: Context) {
    const inc = (c.env as NodeBindings | undefined)?.incoming
    return inc ? (inc as Judged)[ADMISSION] : undefined
  },
  headers(c: Context) {
    return (c.env as NodeBindings | undefined)?.incoming?.headers
  },
}

let loopLag: LoopLag | undefined

/**
 * The Node adapter for `cohort serve`/`cohort gateway`: {@link nodeAdapter}, plus the door's
 * event-loop-lag check (the event loop's delay as each request's queueing delay) unless `off`
 * (`--no-event-loop-lag-check`, old name `--no-front-door`).
 * One sampler per process, shared by every app (its timer is unref'd).
 */
export function gatewayAdapter(off: boolean): GatewayAdapter {
  if (off) {
    return nodeAdapter
  }
  const lag = (loopLag ??= new LoopLag())
  return { ...nodeAdapter, queueDelayMs: () => lag.current() }
}
