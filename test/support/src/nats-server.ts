import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A nats-server started for a test on a random port. */
export interface NatsServerHandle {
  url: string
  port: number
  /** The HTTP monitoring endpoint (`http://127.0.0.1:N`), with `monitor: true`. */
  monitorUrl?: string
  /** Stop the server (SIGTERM, then SIGKILL). Idempotent. */
  stop(): Promise<void>
  /**
   * Stop the server (SIGTERM), wait `downMs`, and start it again on the same port with the same
   * JetStream store: what clients see of a restarted server. Resolves once it listens again.
   */
  restart(downMs?: number): Promise<void>
  /** The process id of the server now running (a restart starts a new one). */
  pid(): number | undefined
  [Symbol.asyncDispose](): Promise<void>
}

/** Options of {@link startNatsServer}. */
export interface NatsServerOptions {
  /** Enable JetStream (store in a temp dir). @default true */
  jetstream?: boolean
  /** max_payload in bytes. @default the server's (1 MiB) */
  maxPayload?: number
  /** Text appended to the generated server config (e.g. an `authorization` block). */
  extraConfig?: string
  /** Serve the HTTP monitoring endpoints (`/subsz`, `/connz`) on a random port. @default false */
  monitor?: boolean
}

/**
 * Start a real `nats-server` on 127.0.0.1 with a random port (read from its ports file).
 * Fails with an install hint when the binary is missing.
 */
export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-nats-'))
  const conf = [`listen: 127.0.0.1:-1`, `ports_file_dir: "${dir}"`]
  if (opts.jetstream ?? true) {
    conf.push(`jetstream { store_dir: "${join(dir, 'js')}" }`)
  }
  if (opts.maxPayload) {
    conf.push(`max_payload: ${opts.maxPayload}`)
  }
  if (opts.monitor) {
    conf.push('http: 127.0.0.1:-1')
  }
  if (opts.extraConfig) {
    conf.push(opts.extraConfig)
  }
  writeFileSync(join(dir, 'server.conf'), conf.join('\n') + '\n')
  let proc = spawnServer(dir)
  const { port, monitorUrl } = await proc.ready
  let stopping: Promise<void> | undefined
  const kill = (p: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (p.exitCode !== null || p.signalCode !== null) {
        resolve()
        return
      }
      const t = setTimeout(() => p.kill('SIGKILL'), 3000)
      p.once('exit', () => {
        clearTimeout(t)
        resolve()
      })
      p.kill('SIGTERM')
    })
  const stop = () => (stopping ??= kill(proc.proc).then(() => rmSync(dir, { recursive: true, force: true })))
  const restart = async (downMs = 0) => {
    await kill(proc.proc)
    await new Promise((r) => setTimeout(r, downMs))
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.ports'))) {
      rmSync(join(dir, f))
    }
    writeFileSync(join(dir, 'server.conf'), conf.map((l) => (l === 'listen: 127.0.0.1:-1' ? `listen: 127.0.0.1:${port}` : l)).join('\n') + '\n')
    proc = spawnServer(dir)
    await proc.ready
  }
  const pid = () => proc.proc.pid
  return { url: `nats://127.0.0.1:${port}`, port, ...(monitorUrl ? { monitorUrl } : {}), stop, restart, pid, [Symbol.asyncDispose]: stop }
}

/** Spawn nats-server on `dir`'s config; `ready` resolves with its ports once it listens. */
function spawnServer(dir: string): { proc: ChildProcess; ready: Promise<{ port: number; monitorUrl?: string }> } {
  let proc: ChildProcess
  try {
    proc = spawn('nats-server', ['-c', join(dir, 'server.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
  } catch (e) {
    throw new Error(`cannot start nats-server (install it: apt-get install nats-server): ${String(e)}`)
  }
  let stderr = ''
  proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
  const spawnError = new Promise<never>((_, reject) => {
    proc.once('error', (e) => reject(new Error(`nats-server is not on PATH (install it: apt-get install nats-server): ${e.message}`)))
    proc.once('exit', (code) => reject(new Error(`nats-server exited with ${code}: ${stderr}`)))
  })
  spawnError.catch(() => undefined)
  const monitor = readFileSync(join(dir, 'server.conf'), 'utf8').includes('http: 127.0.0.1:-1')
  return { proc, ready: Promise.race([waitForPort(dir, monitor), spawnError]) }
}

async function waitForPort(dir: string, monitor: boolean): Promise<{ port: number; monitorUrl?: string }> {
  const until = Date.now() + 10_000
  while (Date.now() < until) {
    const f = readdirSync(dir).find((n) => n.endsWith('.ports'))
    if (f) {
      try {
        const ports = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { nats?: string[]; monitoring?: string[] }
        const url = ports.nats?.[0]
        const mon = ports.monitoring?.[0]
        if (url && (!monitor || mon)) {
          return { port: Number(new URL(url).port), ...(mon ? { monitorUrl: mon } : {}) }
        }
      } catch {
        // Partially written; read again.
      }
    }
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error('nats-server did not write its ports file within 10 s')
}
