// A client cut off at shutdown while sending its body (http.ts `close()`): its request's handler
// sees the cancel, and has logged it, before `close()` resolves: the next shutdown steps (NATS,
// telemetry) and the process exit come after the line, however fast they are.
import { connect } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { Hono } from 'hono'
import { CohortError } from '@cohort/protocol'
import { listen, type HttpServer } from './http.ts'
import { nodeAdapter } from './node-adapter.ts'

const servers: HttpServer[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await s.close(0)
  }
})

describe('listen close', () => {
  it('resolves only after a cut-off request handler has seen its cancel', async () => {
    const events: string[] = []
    let received!: () => void
    const arrived = new Promise<void>((r) => (received = r))
    const app = new Hono()
    app.post('/x', async (c) => {
      const reading = nodeAdapter.readBody!(c, 1 << 20)
      received()
      try {
        await reading
        events.push('body')
      } catch (e) {
        events.push(`handler: ${e instanceof CohortError ? e.code : String(e)}`)
      }
      return c.text('never sent')
    })
    const srv = await listen(app, '127.0.0.1', 0)
    servers.push(srv)
    const sock = connect(srv.port, '127.0.0.1')
    sock.on('error', () => undefined)
    await new Promise<void>((r) => sock.once('connect', () => r()))
    sock.write('POST /x HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a"')
    await arrived
    await srv.close(5_000)
    events.push('closed')
    expect(events).toEqual(['handler: CANCELLED', 'closed'])
    sock.destroy()
  })
})
