// The HTTP server of `cohort gateway|serve` (http.ts) on a real socket: a keep-alive connection that
// serves many requests keeps a constant number of `close` listeners (one per request in flight, not
// one per request ever served: Node warns at 11, MaxListenersExceededWarning).
import { request, Agent } from 'node:http'
import type { Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { Hono } from 'hono'
import { listen, type HttpServer } from './http.ts'

const servers: HttpServer[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await s.close(0)
  }
})

function get(agent: Agent, port: number, method: 'GET' | 'POST'): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/x', method, agent }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => (text += d.toString()))
      res.on('end', () => resolve(text))
    })
    req.on('error', reject)
    req.end(method === 'POST' ? '{"a":1}' : undefined)
  })
}

describe('listen', () => {
  it('keeps the close listeners of a keep-alive socket constant over 40 requests', async () => {
    const sockets = new Set<Socket>()
    const counts: number[] = []
    const app = new Hono<{ Bindings: { incoming: { socket: Socket } } }>()
    const route = async (c: { env: { incoming: { socket: Socket } }; req: { text(): Promise<string> }; text(s: string): Response }) => {
      const s = c.env.incoming.socket
      sockets.add(s)
      await c.req.text()
      counts.push(s.listenerCount('close'))
      return c.text('ok')
    }
    app.get('/x', route)
    app.post('/x', route)
    const warnings: Error[] = []
    const onWarning = (w: Error) => warnings.push(w)
    process.on('warning', onWarning)
    try {
      const srv = await listen(app as unknown as Hono, '127.0.0.1', 0)
      servers.push(srv)
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      for (let i = 0; i < 40; i++) {
        expect(await get(agent, srv.port, i % 2 === 0 ? 'GET' : 'POST')).toBe('ok')
      }
      agent.destroy()
    } finally {
      process.off('warning', onWarning)
    }
    expect(sockets.size).toBe(1) // one keep-alive connection served them all
    expect(counts).toHaveLength(40)
    expect(Math.max(...counts)).toBe(counts[0])
    expect(Math.max(...counts)).toBeLessThan(10)
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([])
  })
})
