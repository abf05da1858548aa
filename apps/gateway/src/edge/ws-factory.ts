/**
 * A `wsFactory` for `wsconnect` on runtimes without a client `new WebSocket(url)` (Cloudflare
 * workerd): open the socket with `fetch(url, { headers: { Upgrade: 'websocket' } })`, accept it,
 * and hand nats-core a small browser-like facade.
 * @module
 */

/** The part of workerd's WebSocket (from `response.webSocket`) this uses. */
interface AcceptedSocket {
  accept(): void
  send(data: ArrayBuffer | ArrayBufferView | string): void
  close(code?: number, reason?: string): void
  addEventListener(type: 'message', fn: (ev: { data: unknown }) => void): void
  addEventListener(type: 'close', fn: (ev: { code?: number; reason?: string; wasClean?: boolean }) => void): void
  addEventListener(type: 'error', fn: (ev: { message?: string }) => void): void
}

/** What the facades hand nats-core's handlers: the fields of the browser events it reads. */
type SocketEvent = { data?: unknown; code?: number; reason?: string; wasClean?: boolean; message?: string }
type Handler = ((ev: SocketEvent) => void) | null

/** The browser-like WebSocket that nats-core's websocket transport drives. */
class SocketFacade {
  binaryType = 'arraybuffer'
  bufferedAmount = 0
  onopen: Handler = null
  onclose: Handler = null
  onerror: Handler = null
  readonly #early: unknown[] = []
  #onmessage: Handler = null

  constructor(readonly ws: AcceptedSocket) {
    ws.addEventListener('message', (ev: { data: unknown }) => {
      // nats-core sets onmessage after the factory returns: keep what the server sent before (INFO).
      if (this.#onmessage) {
        this.#onmessage({ data: ev.data })
      } else {
        this.#early.push(ev.data)
      }
    })
    ws.addEventListener('close', (ev: { code?: number; reason?: string; wasClean?: boolean }) =>
      this.onclose?.({ code: ev.code, reason: ev.reason ?? '', wasClean: ev.wasClean ?? true }),
    )
    ws.addEventListener('error', (ev: { message?: string }) => this.onerror?.({ message: ev.message ?? 'websocket error' }))
  }

  get onmessage(): Handler {
    return this.#onmessage
  }

  set onmessage(fn: Handler) {
    this.#onmessage = fn
    if (fn) {
      for (const data of this.#early.splice(0)) {
        fn({ data })
      }
    }
  }

  send(data: ArrayBuffer | ArrayBufferView | string): void {
    this.ws.send(data)
  }

  close(code?: number, reason?: string): void {
    try {
      this.ws.close(code ?? 1000, reason ?? '')
    } catch {
      // Already closed.
    }
  }
}

/**
 * A socket that failed to open: it reports the error and closes, as a browser WebSocket does. nats-core
 * waits for that close before it gives up on a server, so throwing from the factory would leave its
 * connect pending forever.
 */
class FailedSocket {
  binaryType = 'arraybuffer'
  bufferedAmount = 0
  onopen: Handler = null
  onmessage: Handler = null
  onclose: Handler = null
  onerror: Handler = null

  constructor(readonly message: string) {
    setTimeout(() => {
      this.onerror?.({ message })
      this.onclose?.({ code: 1006, reason: message, wasClean: false })
    }, 0)
  }

  send(): void {
    throw new Error(this.message)
  }

  close(): void {
    // Never opened.
  }
}

/** Open a websocket through `fetch` (workerd) and adapt it for `wsconnect({ wsFactory })`. */
export async function fetchWebSocketFactory(url: string): Promise<{ socket: WebSocket; encrypted: boolean }> {
  const encrypted = url.startsWith('wss://')
  const httpUrl = url.replace(/^ws(s?):\/\//, 'http$1://')
  let ws: AcceptedSocket | null | undefined
  try {
    const res = await fetch(httpUrl, { headers: { Upgrade: 'websocket' } })
    ws = (res as Response & { webSocket?: AcceptedSocket | null }).webSocket
    if (!ws) {
      throw new Error(`websocket upgrade to ${url} failed with HTTP ${res.status}`)
    }
    ws.accept()
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e)
    return { socket: new FailedSocket(message.includes(url) ? message : `${url}: ${message}`) as unknown as WebSocket, encrypted }
  }
  return { socket: new SocketFacade(ws) as unknown as WebSocket, encrypted }
}
