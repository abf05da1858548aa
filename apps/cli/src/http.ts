import { getRequestListener } from '@hono/node-server'
import type { Hono } from 'hono'
import type { EarlyDoor } from '@cohort/gateway'
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { CliError } from './cli-error.ts'
import { DEFAULT_LISTEN_BACKLOG, boundListener, type ListenerBounds } from './listener-bounds.ts'
import { answerEarly } from './node-adapter.ts'

/** A started HTTP server. */
export interface HttpServer {
  port: number
  host: string
  /**
   * Stop listening and close idle connections and those still sending their request (a client
   * trickling its body never holds the process); requests already received finish, and whatever is
   * still open after `lingerMs` (default: wait for them) is closed. Resolves once the cut-off
   * requests' handlers have seen their cancel (so it is logged before the process exits). Idempotent.
   */
  readonly close: (lingerMs?: number) => Promise<void>
}

/**
 * How long a connection closed after answering a request whose body was not read yet keeps reading
 * (and discarding) what the client still sends, ms: nginx's lingering close, so a client still
 * writing a refused large body reads its 413/503 instead of a reset.
 */
export const LINGER_MS = 2_000

/** The latest request of each socket (a keep-alive socket serves many). */
const latest = new WeakMap<Socket, IncomingMessage>()

/**
 * Node closes a connection answered with `Connection: close` by `socket.destroySoon()` right after
 * the response: a client still sending its body then gets a reset, often before it read the answer.
 * For a request whose body is not complete, close the write side only (FIN after the response),
 * keep reading and discarding for at most {@link LINGER_MS}, and destroy once the client closes or
 * the time is up. Installed once per socket.
 */
function lingerOnClose(req: IncomingMessage): void {
  const socket = req.socket as Socket & { destroySoon?: () => void }
  const seen = latest.has(socket)
  latest.set(socket, req)
  if (seen || typeof socket.destroySoon !== 'function') {
    return
  }
  const destroySoon = socket.destroySoon.bind(socket)
  socket.destroySoon = () => {
    const current = latest.get(socket)
    if (!current || current.complete) {
      destroySoon()
      return
    }
    current.resume() // discard the rest of the body
    socket.end()
    const timer = setTimeout(() => socket.destroy(), LINGER_MS)
    timer.unref()
    socket.once('end', () => socket.destroy())
    socket.once('close', () => clearTimeout(timer))
  }
}

/** PEM certificate and key for HTTPS. */
export interface TlsFiles {
  cert: string | Buffer
  key: string | Buffer
}

/**
 * The request listener of `app`: its door at the listener first when it has one (a gateway app's
 * `early`, early.ts: an inference request refused from its head alone is answered there, with no
 * Request, Response or middleware built for it), then the app through @hono/node-server.
 */
function requestListener(app: Hono & { early?: EarlyDoor }): (req: IncomingMessage, res: ServerResponse) => void {
  const fetch = getRequestListener(app.fetch)
  const early = app.early
  if (early === undefined) {
    return (req, res) => void fetch(req, res)
  }
  return (req, res) => {
    if (!answerEarly(early, req, res)) {
      void fetch(req, res)
    }
  }
}

/**
 * Serve a Hono app on host:port (port 0 = any free port); over HTTPS when `tls` is given, within
 * `bounds` (the listen backlog and the open connections; listener-bounds.ts).
 */
export function listen(app: Hono & { early?: EarlyDoor }, host: string, port: number, tls?: TlsFiles, bounds: ListenerBounds = {}): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    let server: Server
    try {
      const handler = requestListener(app)
      server = tls ? createHttpsServer({ cert: tls.cert, key: tls.key }, handler) : createHttpServer(handler)
      boundListener(server, bounds)
      server.listen({ port, host, backlog: bounds.backlog ?? DEFAULT_LISTEN_BACKLOG }, () => onListening(server.address() as AddressInfo))
    } catch (e) {
      // A certificate that does not parse, or a key that does not match it.
      reject(new CliError(`cannot serve HTTPS with --tls-cert/--tls-key: ${e instanceof Error ? e.message : String(e)}`))
      return
    }
    function onListening(info: AddressInfo) {
      let closing: Promise<void> | undefined
      const http = server
      const requests = new Set<IncomingMessage>()
      http.on('request', (req: IncomingMessage) => {
        requests.add(req)
        lingerOnClose(req)
        // One listener on the socket per request in flight, removed with the request: a keep-alive
        // socket serves many requests and must not collect one per request (MaxListenersExceededWarning).
        const socket = req.socket
        const gone = () => requests.delete(req)
        socket.once('close', gone)
        req.once('close', () => {
          requests.delete(req)
          socket.off('close', gone)
        })
      })
      resolve({
        port: info.port,
        host,
        close: (lingerMs?: number) =>
          (closing ??= (async () => {
            const linger = lingerMs === undefined ? undefined : setTimeout(() => http.closeAllConnections(), lingerMs)
            const stopped = new Promise<void>((r) => http.close(() => r()))
            http.closeIdleConnections()
            const cut: Promise<void>[] = []
            for (const req of requests) {
              if (!req.complete) {
                cut.push(new Promise<void>((r) => (req.closed ? r() : req.once('close', () => r()))))
                req.socket.destroy()
              }
            }
            // The server reports closed as soon as its connection count is zero, before a destroyed
            // socket's 'close' reaches the request it carried: wait for each cut-off request's
            // 'close' (its handler's cancel, answered and logged), and one turn of the loop for the
            // handlers' promise chains, so the shutdown's next steps and the exit come after.
            await Promise.all([stopped, ...cut])
            await new Promise<void>((r) => setImmediate(r))
            clearTimeout(linger)
          })()),
      })
    }
    server.on('error', (e: NodeJS.ErrnoException) => reject(new CliError(e.code === 'EADDRINUSE' ? `port ${port} on ${host} is already in use` : e.message)))
  })
}
