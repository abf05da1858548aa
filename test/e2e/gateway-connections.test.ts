// The gateway's HTTP connections, on a real `cohort gateway` process over real NATS:
// - 40 requests on one keep-alive connection print no MaxListenersExceededWarning (a `close`
//   listener was added to the socket per request);
// - a client still sending its body when SIGTERM's grace period ends is cut off and logged as a
//   cancel (CANCELLED, 499), not as an INTERNAL 500 "aborted".
import { request, Agent } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

let nats: NatsServerHandle
const procs: CliProcess[] = []

beforeAll(async () => {
  nats = await startNatsServer()
})

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await nats?.stop()
})

async function gateway(args: string[] = []): Promise<{ gw: CliProcess; port: number }> {
  const gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', ...args])
  procs.push(gw)
  const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  return { gw, port: Number(port) }
}

function send(agent: Agent, port: number, method: string, path: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end(body)
  })
}

describe('gateway connections', () => {
  it('serves 40 requests on one keep-alive connection without a MaxListenersExceededWarning', async () => {
    const { gw, port } = await gateway()
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const sockets = new Set<unknown>()
    agent.on('free', (s) => sockets.add(s))
    const statuses: number[] = []
    for (let i = 0; i < 40; i++) {
      // GETs and POSTs (a POST to a model nobody serves answers at once: 404 or 503).
      statuses.push(await send(agent, port, i % 2 ? 'POST' : 'GET', i % 2 ? '/v2/models/none/infer' : '/v2/health/live', i % 2 ? '{"inputs":[]}' : undefined))
    }
    agent.destroy()
    expect(sockets.size).toBe(1)
    expect(statuses.filter((s, i) => i % 2 === 0 && s !== 200)).toEqual([])
    await gw.stop('SIGTERM')
    expect(gw.output()).not.toMatch(/MaxListenersExceededWarning/)
  }, 120_000)

  it('logs a client cut off at shutdown while sending its body as a cancel, not INTERNAL', async () => {
    const { gw, port } = await gateway(['--drain-ms', '300'])
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] })
    const sock = connect(port, '127.0.0.1')
    await new Promise<void>((r) => sock.once('connect', () => r()))
    sock.on('error', () => undefined)
    const closed = new Promise<void>((r) => sock.once('close', () => r()))
    sock.write(`POST /v2/models/demo/infer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`)
    sock.write(body.slice(0, 5)) // the request is received; its body is not
    await new Promise((r) => setTimeout(r, 300))
    gw.proc.kill('SIGTERM')
    expect(await gw.exited).toBe(0)
    await closed
    const out = gw.output()
    expect(out).toMatch(/"code":"CANCELLED"/)
    expect(out).not.toMatch(/"code":"INTERNAL"/)
    expect(out).not.toMatch(/"status":500/)
  }, 120_000)
})
