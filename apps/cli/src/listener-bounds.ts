/**
 * What may pile up in the HTTP listener before a handler runs (docs/reliability.md#no-wait-the-door-cannot-see):
 * the kernel's accept queue (the listen backlog), the open connections (over the bound a new
 * connection is answered 503 at accept, before any byte of it is parsed, and closed), and each
 * request's arrival time, so the door can count the wait it had before its handler ran.
 * @module
 */
import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'

/** Default {@link ListenerBounds.maxConnections}. */
export const DEFAULT_MAX_CONNECTIONS = 1024
/** Default {@link ListenerBounds.backlog}: Node's own (the kernel caps it at `net.core.somaxconn`). */
export const DEFAULT_LISTEN_BACKLOG = 511
/** How long a connection refused at accept keeps reading (and discarding) what its client sends before it is closed, ms. */
export const REFUSED_LINGER_MS = 1_000

/** Bounds of the HTTP listener. */
export interface ListenerBounds {
  /** Most open connections; a connection over it is answered 503 OVERLOADED at accept and closed. 0: unbounded. @default 1024 */
  maxConnections?: number
  /** The listen backlog: connections the kernel holds before they are accepted. @default 511 */
  backlog?: number
  /** Called once per connection refused at accept (the gateway counts it in `cohort_door_refusals_total{check="connections"}`). */
  onRefused?: () => void
}

const REFUSAL_BODY = JSON.stringify({ error: 'the gateway is at its open-connections bound (--max-connections); retry later', code: 'OVERLOADED' })
/** The whole answer to a connection over the bound, built once. */
const REFUSAL = Buffer.from(
  `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(REFUSAL_BODY)}\r\n\r\n${REFUSAL_BODY}`,
)

/**
 * Arrival of each request (`performance.now()` ms): its connection's accept for the first, its
 * `request` event for later ones. A property of the request and of the socket, not a WeakMap: V8's
 * scavenger treats WeakMap values as strong, and per-request WeakMap entries kept each request's
 * objects alive into the old generation (docs/bench/gc-2026-12-03.md).
 */
const ARRIVED = Symbol('cohort.arrivedAt')
/** Accept time of a connection whose first request has not come yet. */
const ACCEPTED = Symbol('cohort.acceptedAt')
type Arrived = IncomingMessage & { [ARRIVED]?: number }
type Accepted = Socket & { [ACCEPTED]?: number }

/** When `req` arrived (`performance.now()` ms), if the listener saw it. */
export function arrivedAt(req: IncomingMessage): number | undefined {
  return (req as Arrived)[ARRIVED]
}

/**
 * Answer a connection over the bound: the prebuilt 503 and a half-close, reading and discarding
 * what the client sends (a request it already wrote) until it closes or {@link REFUSED_LINGER_MS},
 * so it reads the 503 rather than a reset.
 */
function refuseAtAccept(socket: Socket): void {
  socket.on('error', () => undefined)
  socket.resume()
  socket.end(REFUSAL)
  const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS)
  timer.unref()
  socket.once('end', () => socket.destroy())
  socket.once('close', () => clearTimeout(timer))
}

/**
 * Bound the open connections of `server` and record each request's arrival. The HTTP server's
 * own connection listener runs only for connections within the bound: one over it never reaches
 * the HTTP parser.
 */
export function boundListener(server: Server, b: ListenerBounds = {}): void {
  const max = b.maxConnections ?? DEFAULT_MAX_CONNECTIONS
  const own = server.listeners('connection') as ((s: Socket) => void)[]
  server.removeAllListeners('connection')
  let open = 0
  server.on('connection', (socket: Socket) => {
    if (max > 0 && open >= max) {
      b.onRefused?.()
      refuseAtAccept(socket)
      return
    }
    open++
    socket.once('close', () => open--)
    ;(socket as Accepted)[ACCEPTED] = performance.now()
    for (const l of own) {
      l.call(server, socket)
    }
  })
  // Before the app's own listener, which runs the handler at once.
  server.prependListener('request', (req: IncomingMessage) => {
    const socket = req.socket as Accepted
    const at = socket[ACCEPTED]
    if (at !== undefined) {
      socket[ACCEPTED] = undefined
      ;(req as Arrived)[ARRIVED] = at
    } else {
      ;(req as Arrived)[ARRIVED] = performance.now()
    }
  })
}
