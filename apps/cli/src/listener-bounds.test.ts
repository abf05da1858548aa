// The HTTP listener's bounds (listener-bounds.ts) on real sockets: a connection over
// --max-connections is answered 503 OVERLOADED at accept (never parsed: the app does not run) and
// closed after the client read it; connections within the bound are served; each request's arrival
// is its connection's accept, so a request whose bytes came late on a new connection shows the wait.
import { connect, type Socket } from 'node:net'
import type { IncomingMessage } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { Hono } from 'hono'
import { createApp } from '@cohort/gateway'
import { InProcessTransport } from '@cohort/transport'
import { listen, type HttpServer } from './http.ts'
import { arrivedAt } from './listener-bounds.ts'
import { gatewayAdapter } from './node-adapter.ts'

const servers: HttpServer[] = []
const sockets: Socket[] = []
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy()
  for (const s of servers.splice(0)) await s.close(0)
})

/** Open a connection, optionally write `text`, and resolve with everything read until the server closes it (or `untilBytes` came). */
function raw(port: number, text?: string): { socket: Socket; read: Promise<string>; opened: Promise<void> } {
  const socket = connect(port, '127.0.0.1')
  sockets.push(socket)
  let got = ''
  const opened = new Promise<void>((r) => socket.once('connect', () => r()))
  const read = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')))
    socket.on('close', () => resolve(got))
    socket.on('error', () => undefined)
  })
  if (text !== undefined) socket.write(text)
  return { socket, read, opened }
}

const GET = 'GET /x HTTP/1.1\r\nHost: x\r\n\r\n'

describe('listener bounds', () => {
  it('over maxConnections a new connection gets 503 OVERLOADED + Retry-After + Connection: close, without running the app; one within the bound is served', async () => {
    let ran = 0
    const app = new Hono()
    app.get('/x', (c) => {
      ran++
      return c.text('ok')
    })
    let refused = 0
    const srv = await listen(app, '127.0.0.1', 0, undefined, { maxConnections: 2, onRefused: () => refused++ })
    servers.push(srv)
    const a = raw(srv.port)
    const b = raw(srv.port)
    await Promise.all([a.opened, b.opened])
    await new Promise((r) => setTimeout(r, 50)) // both accepted
    const over = await raw(srv.port, GET).read
    expect(over).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/)
    expect(over).toMatch(/retry-after: 1\r\n/)
    expect(over).toMatch(/connection: close\r\n/)
    expect(over).toMatch(/"code":"OVERLOADED"/)
    expect(refused).toBe(1)
    expect(ran).toBe(0)
    a.socket.destroy()
    await new Promise((r) => setTimeout(r, 50)) // its close is seen: room for one
    const within = raw(srv.port, 'GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    expect(await within.read).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*ok$/)
    expect(ran).toBe(1)
  })

  it("a request's arrival is its connection's accept: bytes sent 200 ms after connecting show about 200 ms of wait", async () => {
    const waits: number[] = []
    const app = new Hono<{ Bindings: { incoming: IncomingMessage } }>()
    app.get('/x', (c) => {
      waits.push(performance.now() - arrivedAt(c.env.incoming)!)
      return c.text('ok')
    })
    const srv = await listen(app as unknown as Hono, '127.0.0.1', 0)
    servers.push(srv)
    const late = raw(srv.port)
    await late.opened
    await new Promise((r) => setTimeout(r, 200))
    late.socket.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    expect(await late.read).toMatch(/ok[\s\S]*ok$/)
    expect(waits).toHaveLength(2)
    expect(waits[0]).toBeGreaterThanOrEqual(190)
    // The next request on the same connection arrives when its request event comes: no accept wait.
    expect(waits[1]).toBeLessThan(waits[0]!)
  })

  it('through the gateway: a request whose bytes came 300 ms after its connection was accepted, with a 200 ms budget, is refused 503 by the arrival-wait check before its body is read', async () => {
    const transport = new InProcessTransport()
    const app = createApp({ transport, adapter: gatewayAdapter(true), workerWait: false })
    const srv = await listen(app, '127.0.0.1', 0)
    servers.push(srv)
    const req = (timeoutMs: number) =>
      `POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Cohort-Timeout-Ms: ${timeoutMs}\r\nConnection: close\r\nContent-Length: 10\r\n\r\n{ not json`
    const late = raw(srv.port)
    await late.opened
    await new Promise((r) => setTimeout(r, 300))
    late.socket.write(req(200))
    const refused = await late.read
    expect(refused).toMatch(/^HTTP\/1\.1 503 /)
    expect(refused).toMatch(/arrival-wait check/)
    // The same request sent at once is judged within its budget: its body is read (a bad body: 400).
    const prompt = await raw(srv.port, req(200)).read
    expect(prompt).toMatch(/^HTTP\/1\.1 400 /)
    await app.close()
    await transport.close()
  })
})
