// The one shutdown path (apps/cli/src/shutdown.ts) seen from outside:
// - `npm start` (the root package.json script, as `CMD npm start` in a container runs it) on a free
//   PORT: SIGTERM or SIGINT to npm drains `cohort serve` and leaves no process serving the port.
// - A gateway SIGTERM'd while a client trickles its request body at 1 byte/s: after --drain-ms it
//   closes that connection and exits, instead of waiting for the client (Node's own limit is 300 s).
import { createServer, connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, spawnProcess, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const procs: CliProcess[] = []

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
})

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

/** True once nothing accepts connections on the port (polled up to `ms`). */
async function portClosed(port: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms
  while (Date.now() < until) {
    const open = await fetch(`http://127.0.0.1:${port}/v2/health/live`).then(
      async (r) => (await r.arrayBuffer(), true),
      () => false,
    )
    if (!open) {
      return true
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  return false
}

describe('npm start', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`drains and exits on ${signal} to npm, leaving nothing serving PORT`, async () => {
      const port = await freePort()
      const npm = spawnProcess('npm', ['start'], { cwd: ROOT, env: { PORT: String(port) }, label: 'npm start' })
      procs.push(npm)
      await npm.waitFor(new RegExp(`serving demo on http://127\\.0\\.0\\.1:${port}`), 90_000)
      expect((await fetch(`http://127.0.0.1:${port}/v2/health/live`)).status).toBe(200)
      npm.proc.kill(signal)
      await npm.exited
      // The server is the one that got the signal: it says so, drains and stops listening.
      expect(await portClosed(port, 20_000), `port ${port} still served after npm exited:\n${npm.output()}`).toBe(true)
      expect(npm.output()).toMatch(new RegExp(`cohort: ${signal}, draining`))
    }, 150_000)
  }
})

describe('gateway SIGTERM with a client sending 1 byte/s', () => {
  let nats: NatsServerHandle
  beforeAll(async () => {
    nats = await startNatsServer()
  })
  afterAll(async () => {
    await ifStarted(nats)?.stop()
  })

  it('closes the trickling connection after --drain-ms and exits 0', async () => {
    const DRAIN_MS = 500
    const gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', String(DRAIN_MS)])
    procs.push(gw)
    const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] })
    const sock = connect(Number(port), '127.0.0.1')
    await new Promise<void>((r) => sock.once('connect', () => r()))
    let received = ''
    sock.on('data', (d) => (received += d.toString()))
    const closed = new Promise<void>((r) => sock.once('close', () => r()))
    sock.on('error', () => undefined)
    sock.write(`POST /v2/models/demo/infer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`)
    let sent = 0
    const trickle = setInterval(() => {
      if (sent < body.length && !sock.destroyed) {
        sock.write(body[sent++]!)
      }
    }, 1_000)
    try {
      await new Promise((r) => setTimeout(r, 1_500)) // the request is in flight, its body unfinished
      const sigterm = Date.now()
      gw.proc.kill('SIGTERM')
      const code = await gw.exited
      const tookMs = Date.now() - sigterm
      await closed
      expect(code).toBe(0)
      // The body (~80 bytes at 1 byte/s) is far from sent: the gateway did not wait for it.
      expect(sent).toBeLessThan(body.length)
      expect(received, 'the half-sent request got no answer').toBe('')
      // Bounded by the drain, not the client: the client alone would have kept it up for ~80 s.
      expect(tookMs).toBeGreaterThanOrEqual(DRAIN_MS)
      expect(tookMs).toBeLessThan(body.length * 1_000 - 20_000)
      expect(gw.output()).toMatch(/gateway draining: \/v2\/health\/ready answers 503 for 500 ms/)
    } finally {
      clearInterval(trickle)
      sock.destroy()
    }
  }, 120_000)
})
