// The door at the listener (apps/gateway/src/early.ts through http.ts and node-adapter.ts), on a
// real socket: an inference request the door refuses is answered from its head, before the Hono
// app runs (no Request, Response, middleware or body read), with the answer the app would give;
// what it costs per request is counted against a bare node:http server answering the same 503.
import { createServer, request, Agent, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { createApp, type GatewayApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { countPerRequest, countsAbove } from '@cohort/test-support'
import { listen, type HttpServer } from './http.ts'
import { nodeAdapter } from './node-adapter.ts'

const servers: HttpServer[] = []
const apps: GatewayApp[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await s.close(0)
  }
  for (const a of apps.splice(0)) {
    await a.close()
  }
})

const BODY = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] })

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
  socket: Socket
}

function post(agent: Agent, port: number, path: string, headers: Record<string, string> = {}, body = BODY): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => (text += d.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, socket: req.socket as Socket }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** A gateway app whose event-loop-lag check reads a delay past any budget (so its door refuses every inference request), served by cohort's Node listener; `fetches` counts the requests that reached the Hono app. */
async function refusingGateway(o: { apiKeys?: string[]; draining?: () => boolean } = {}) {
  const registry = new Registry()
  const app = createApp({ transport: new InProcessTransport(), registry, adapter: { ...nodeAdapter, queueDelayMs: () => 60_000 }, ...o })
  apps.push(app)
  let fetches = 0
  const fetch = app.fetch.bind(app)
  app.fetch = (...a: Parameters<typeof fetch>) => {
    fetches++
    return fetch(...a)
  }
  const srv = await listen(app, '127.0.0.1', 0)
  servers.push(srv)
  const metric = (name: string, label: string) =>
    registry
      .render()
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) && l.includes(label))
      .reduce((a, l) => a + Number(l.split(' ').pop()), 0)
  return { app, port: srv.port, fetches: () => fetches, metric }
}

describe('the door at the listener', () => {
  it('answers a refused inference request before the app runs, with the answer, headers and counts the app would give', async () => {
    const g = await refusingGateway()
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const early = await post(agent, g.port, '/v2/models/m/infer', { 'x-request-id': 'client-7' })
    expect(g.fetches()).toBe(0) // never reached Hono
    // The same request through the app itself (Hono, no listener): the same answer.
    const viaApp = await g.app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'client-7' }, body: BODY })
    expect(early.status).toBe(503)
    expect(early.status).toBe(viaApp.status)
    expect(JSON.parse(early.body)).toEqual(await viaApp.json())
    expect(JSON.parse(early.body)).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/saturated/) })
    for (const h of ['content-type', 'retry-after', 'x-request-id']) {
      expect([h, early.headers[h]]).toEqual([h, viaApp.headers.get(h)])
    }
    expect(early.headers['connection']).not.toBe('close')
    // Counted as the app counts a refusal: the door check's refusal and the request's code.
    expect(g.metric('cohort_door_refusals_total', 'check="event_loop_lag"')).toBe(2)
    expect(g.metric('cohort_requests_total', 'code="OVERLOADED"')).toBe(2)
    agent.destroy()
  })

  it('keeps the connection: 20 refusals on one keep-alive socket, the unread bodies drained', async () => {
    const g = await refusingGateway()
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const sockets = new Set<Socket>()
    for (let i = 0; i < 20; i++) {
      const a = await post(agent, g.port, '/v2/models/m/versions/2/infer')
      expect(a.status).toBe(503)
      sockets.add(a.socket)
    }
    expect(sockets.size).toBe(1)
    expect(g.fetches()).toBe(0)
    agent.destroy()
  })

  it('leaves to the app what it cannot judge alone: other routes, a wrong key, a bad timeout header, a body too large to drain, draining', async () => {
    let draining = false
    const g = await refusingGateway({ apiKeys: ['k1'], draining: () => draining })
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const auth = { authorization: 'Bearer k1' }
    expect((await post(agent, g.port, '/v2/models/m/infer', auth)).status).toBe(503)
    expect(g.fetches()).toBe(0)
    const cases: [string, Record<string, string>, number, string?][] = [
      ['/v2/models/m/infer', { authorization: 'Bearer nope' }, 401],
      ['/v2/models/m/infer', { ...auth, 'x-cohort-timeout-ms': 'soon' }, 400],
      ['/v2/models/m%2Fx/infer', auth, 404],
      ['/v2/models/m/versions/x/infer', auth, 404],
      ['/v2/models/m/generate', auth, 503],
      ['/v2/models/m/infer', auth, 503, 'x'.repeat(70_000)],
    ]
    let n = 0
    for (const [path, headers, status, body] of cases) {
      const a = await post(agent, g.port, path, headers, body)
      expect([path, a.status]).toEqual([path, status])
      expect([path, g.fetches()]).toEqual([path, ++n])
    }
    draining = true
    const a = await post(new Agent({ keepAlive: true }), g.port, '/v2/models/m/infer', auth)
    expect([a.status, g.fetches()]).toEqual([503, n + 1])
    expect(a.headers['connection']).toBe('close') // the app's drain rule
    agent.destroy()
  })

  it('costs, per refusal, no timer, socket write or JSON work and at most one promise above a bare node:http server answering the same 503', async () => {
    // The floor: a bare server that answers 503 without reading the body, the same client.
    const floorServer: Server = createServer((_req, res) => {
      const body = JSON.stringify({ error: 'refused', code: 'OVERLOADED' })
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
    await new Promise<void>((r) => floorServer.listen(0, '127.0.0.1', () => r()))
    const floorAgent = new Agent({ keepAlive: true, maxSockets: 1 })
    const floorPort = (floorServer.address() as AddressInfo).port
    try {
      const floor = await countPerRequest(() => post(floorAgent, floorPort, '/v2/models/m/infer'), 40)
      const g = await refusingGateway()
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      const early = await countPerRequest(() => post(agent, g.port, '/v2/models/m/infer'), 40)
      const above = countsAbove(early, floor)
      console.log(`refusal at the listener above a bare 503: ${JSON.stringify(above)}`)
      expect(g.fetches()).toBe(0)
      // Budgets (docs/architecture.md#per-request-budgets): the floor's stringify is its own 503 body, so the door's is the one above it.
      expect({
        timers: above.timers <= 0.1,
        immediates: above.immediates <= 0.1,
        promises: above.promises <= 1,
        socketWrites: above.socketWrites <= 0.1,
        jsonParses: above.jsonParses <= 0,
        jsonStringifies: above.jsonStringifies <= 0.1,
        msgpackEncodes: above.msgpackEncodes <= 0,
      }).toEqual({ timers: true, immediates: true, promises: true, socketWrites: true, jsonParses: true, jsonStringifies: true, msgpackEncodes: true })
      agent.destroy()
    } finally {
      floorAgent.destroy()
      await new Promise<void>((r) => floorServer.close(() => r()))
    }
  })
})
