// The gateway's HTTP connections, on a real `cohort gateway` process over real NATS:
// - 40 requests on one keep-alive connection print no MaxListenersExceededWarning (a `close`
//   listener was added to the socket per request);
// - a client still sending its body when SIGTERM's grace period ends is cut off and logged as a
//   cancel (CANCELLED, 499), not as an INTERNAL 500 "aborted";
// - a small body refused 503 at the in-flight bound is read and discarded: the client gets its 503
//   and its keep-alive connection serves the next request;
// - a client that keeps sending a large body refused 413 before it was read reads its 413 and
//   finishes sending without a reset (the gateway half-closes and discards, nginx's lingering close).
import { request, Agent } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

let nats: NatsServerHandle
const procs: CliProcess[] = []

beforeAll(async () => {
  nats = await startNatsServer()
})

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

async function gateway(args: string[] = []): Promise<{ gw: CliProcess; port: number }> {
  const gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', ...args])
  procs.push(gw)
  const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  return { gw, port: Number(port) }
}

/** The sockets requests went out on, in order. */
const used: unknown[] = []

function send(agent: Agent, port: number, method: string, path: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent, headers: body ? { 'content-type': 'application/json', 'x-cohort-timeout-ms': '20000' } : {} }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.on('socket', (s) => used.push(s))
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

  it('answers a small refused body 503 and keeps the keep-alive connection for the next request', async () => {
    const worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'wc', '--predictor', SLEEPY_PREDICTOR])
    procs.push(worker)
    await worker.waitFor(/worker wc serving sleepy/, 60_000)
    const { port } = await gateway(['--max-inflight-requests', '1'])
    // One request holds the only slot for 3 s (its own connection).
    const holder = send(new Agent({ keepAlive: false }), port, 'POST', '/models/sleepy/predictions', JSON.stringify({ input: { x: 1, sleepMs: 3000 } }))
    await new Promise((r) => setTimeout(r, 500))
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const from = used.length
    const refused = await send(agent, port, 'POST', '/models/sleepy/predictions', JSON.stringify({ input: { x: 2 } }))
    const next = await send(agent, port, 'GET', '/v2/health/live')
    agent.destroy()
    expect(refused).toBe(503)
    expect(next).toBe(200)
    const [a, b] = used.slice(from)
    expect(a === b, 'the refused request closed its connection').toBe(true)
    expect(await holder).toBe(200)
  }, 120_000)

  it('lets a client still sending a large refused body read its 413, without a reset', async () => {
    const { port } = await gateway(['--max-inflight-bytes', String(1 << 20)])
    const size = 32 << 20
    const sock = connect(port, '127.0.0.1')
    await new Promise<void>((r) => sock.once('connect', () => r()))
    let received = ''
    let error: Error | undefined
    sock.on('data', (d) => (received += d.toString('latin1')))
    sock.on('error', (e) => (error = e))
    const closed = new Promise<void>((r) => sock.once('close', () => r()))
    sock.write(`POST /v2/models/demo/infer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/octet-stream\r\ncontent-length: ${size}\r\n\r\n`)
    const chunk = Buffer.alloc(256 << 10, 7)
    for (let sent = 0; sent < size && !sock.destroyed; sent += chunk.length) {
      if (!sock.write(chunk)) {
        await new Promise<void>((r) => {
          sock.once('drain', r)
          sock.once('close', r)
        })
      }
    }
    sock.end()
    await closed
    expect(error, received.slice(0, 200)).toBeUndefined()
    expect(received).toMatch(/^HTTP\/1\.1 413 /)
    expect(received).toMatch(/PAYLOAD_TOO_LARGE/)
  }, 120_000)

  // In the full parallel e2e run the line was missing 3 times of 3 (it passed alone): `close()` of
  // the HTTP server resolved when the server's connection count reached zero, before the destroyed
  // socket's 'close' reached the request, so the cancel was logged only if the next shutdown steps
  // took longer than that (apps/cli/src/http-close-order.test.ts shows the order); and the output
  // was read at the child's 'exit', before its last stderr bytes were read (`exited` now waits for
  // the pipes).
  it('logs a client cut off at shutdown while sending its body as a cancel, not INTERNAL', async () => {
    const { gw, port } = await gateway(['--drain-ms', '300'])
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] })
    const sock = connect(port, '127.0.0.1')
    await new Promise<void>((r) => sock.once('connect', () => r()))
    sock.on('error', () => undefined)
    const closed = new Promise<void>((r) => sock.once('close', () => r()))
    sock.write(`POST /v2/models/demo/infer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`)
    sock.write(body.slice(0, 5)) // the request is received; its body is not
    // A barrier, not only a timer: a request sent after ours and answered means the gateway's event
    // loop has read what was on our socket before it (a loaded machine can delay a lone timer's worth).
    for (let i = 0; i < 3; i++) await (await fetch(`http://127.0.0.1:${port}/v2/health/live`)).arrayBuffer()
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
