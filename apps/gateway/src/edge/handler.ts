/**
 * The gateway on edge runtimes (workerd, Bun, Deno): the same `createApp`, over a NATS connection
 * made with `wsconnect` (websocket). Web APIs only; each runtime's entry supplies the connection.
 * @see docs/edge.md
 * @module
 */
import type { NatsConnection } from '@nats-io/nats-core'
import { Registry } from '@cohort/metrics'
import { createNatsTransport, type NatsTransportOptions } from '@cohort/transport'
import { createApp } from '../app.ts'
import type { GatewayOptions } from '../options.ts'

/** Default wait for the websocket connection to NATS before answering 503 (3 s). */
export const DEFAULT_EDGE_CONNECT_TIMEOUT_MS = 3_000

/** Options of {@link createEdgeGateway}. */
export interface EdgeGatewayOptions {
  /** Open a NATS connection (typically `wsconnect`). */
  connect: () => Promise<NatsConnection>
  /**
   * `request`: one connection per HTTP request, closed after the response (workerd, where an I/O
   * object belongs to the request that made it). `shared`: one connection for the process,
   * opened on first use and reopened after a failure (Bun, Deno). @default 'shared'
   */
  scope?: 'request' | 'shared'
  /** Answer 503 when NATS is not reached within this many ms. @default 3000 */
  connectTimeoutMs?: number
  /** Options of the NATS transport (large-message bound). */
  transport?: Omit<NatsTransportOptions, 'ownsConnection'>
  /** Gateway options but the transport. */
  gateway?: Omit<GatewayOptions, 'transport'>
}

/** A fetch handler plus an idempotent `close()`. */
export interface EdgeGateway {
  /** Serve one request; `waitUntil` (workerd's ctx) keeps the isolate alive while the connection closes. */
  fetch(req: Request, waitUntil?: (p: Promise<unknown>) => void): Promise<Response>
  close(): Promise<void>
}

interface Connected {
  readonly nc: NatsConnection
  readonly app: ReturnType<typeof createApp>
  readonly close: () => Promise<void>
}

/** Build the edge gateway: 503 `NO_WORKER` at once when NATS cannot be reached, never a hang. */
export function createEdgeGateway(o: EdgeGatewayOptions): EdgeGateway {
  const timeoutMs = o.connectTimeoutMs ?? DEFAULT_EDGE_CONNECT_TIMEOUT_MS
  // One registry for the gateway's life: with `scope: 'request'` each request builds its own app,
  // and a registry per app would make /metrics answer only the TYPE lines of empty metrics.
  const registry = o.gateway?.registry ?? new Registry()
  let shared: Promise<Connected> | undefined
  let closed = false

  const open = (): Promise<Connected> => openConnected(o, registry, timeoutMs)

  return {
    async fetch(req, waitUntil) {
      if (closed) {
        return Response.json({ error: 'the gateway is closed', code: 'SHUTTING_DOWN' }, { status: 503 })
      }
      if ((o.scope ?? 'shared') === 'request') {
        return servePerRequest(open, req, waitUntil)
      }
      if (!shared) {
        const p = open()
        shared = p
        p.then(
          (c) => {
            // Reconnect on the next request once this connection ends for good.
            void c.nc.closed().then(() => {
              if (shared === p) {
                shared = undefined
              }
            })
          },
          () => {
            if (shared === p) {
              shared = undefined
            }
          },
        )
      }
      let c: Connected
      try {
        c = await shared
      } catch (e) {
        return unavailable(e)
      }
      return c.app.fetch(req)
    },
    async close() {
      closed = true
      const s = shared
      shared = undefined
      await s?.then((c) => c.close()).catch(() => undefined)
    },
  }
}

/** A NATS connection (within `timeoutMs`), its transport and an app over them. */
async function openConnected(o: EdgeGatewayOptions, registry: Registry, timeoutMs: number): Promise<Connected> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const pending = o.connect()
  const nc = await Promise.race([
    pending,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no NATS connection within ${timeoutMs} ms`)), timeoutMs)
    }),
  ]).finally(() => clearTimeout(timer))
  const transport = createNatsTransport(nc, { ...o.transport, ownsConnection: true })
  const app = createApp({ ...o.gateway, registry, transport })
  return {
    nc,
    app,
    close: async () => {
      await app.close()
      await transport.close()
    },
  }
}

/** The 503 answered when NATS cannot be reached. */
function unavailable(e: unknown): Response {
  return Response.json(
    { error: `NATS is unreachable over websocket: ${e instanceof Error ? e.message : String(e)}`, code: 'NO_WORKER' },
    { status: 503, headers: { 'retry-after': '1' } },
  )
}

/** `scope: 'request'`: one connection for this request, closed once its response body ends. */
async function servePerRequest(open: () => Promise<Connected>, req: Request, waitUntil?: (p: Promise<unknown>) => void): Promise<Response> {
  let c: Connected
  try {
    c = await open()
  } catch (e) {
    return unavailable(e)
  }
  let res: Response
  try {
    res = await c.app.fetch(req)
  } catch (e) {
    waitUntil?.(c.close().catch(() => undefined))
    throw e
  }
  // The connection lives as long as the body: passed through as it is read (a streamed
  // response, SSE or NDJSON, reaches the client as it is made) and closed at its end or
  // when the client goes.
  return closingAfterBody(res, () => waitUntil?.(c.close().catch(() => undefined)))
}

/**
 * `res` with a body that calls `end` once (at the body's end, on a read error, or when the reader
 * cancels); at once when there is no body.
 */
export function closingAfterBody(res: Response, end: () => void): Response {
  let ended = false
  const once = () => {
    if (!ended) {
      ended = true
      end()
    }
  }
  if (res.body === null) {
    once()
    return res
  }
  const reader = res.body.getReader()
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done, value } = await reader.read()
        if (done) {
          ctrl.close()
          once()
        } else {
          ctrl.enqueue(value)
        }
      } catch (e) {
        ctrl.error(e)
        once()
      }
    },
    async cancel(reason) {
      try {
        await reader.cancel(reason)
      } finally {
        once()
      }
    },
  })
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
}
