import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'

/** A real redis-server for a test: random port, no persistence. */
export interface RedisServerHandle {
  url: string
  /** A client for the test's own commands (closed by stop). */
  client: Redis
  /** Stop the server (SIGTERM, then SIGKILL). Idempotent. */
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

/** Start `redis-server --port N --save '' --appendonly no`; fails with an install hint when missing. */
export async function startRedisServer(): Promise<RedisServerHandle> {
  const port = await freePort()
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()))
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()))
  const exited = new Promise<void>((r) => proc.once('exit', () => r()))
  const spawnErr = new Promise<never>((_, reject) => proc.once('error', (e) => reject(new Error(`cannot start redis-server (apt-get install redis-server): ${e.message}`))))
  const ready = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 20_000)
    const check = () => {
      if (/Ready to accept connections/.test(out)) {
        clearTimeout(t)
        resolve()
      }
    }
    proc.stdout.on('data', check)
    void exited.then(() => reject(new Error(`redis-server exited:\n${out}`)))
  })
  await Promise.race([ready, spawnErr])
  const url = `redis://127.0.0.1:${port}`
  const client = new Redis(url)
  let stopped: Promise<void> | undefined
  return {
    url,
    client,
    stop() {
      stopped ??= (async () => {
        client.disconnect()
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGTERM')
          const t = setTimeout(() => proc.kill('SIGKILL'), 5_000)
          await exited
          clearTimeout(t)
        }
      })()
      return stopped
    },
  }
}
