// Start the edge gateway in workerd and in Bun (binaries from the npm packages `workerd`, `bun`).
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { buildWorkerd } from '../../apps/gateway/src/adapters/edge-bundle.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BIN = (name: string) => `${ROOT}node_modules/.bin/${name}`
const BUN_ENTRY = `${ROOT}apps/gateway/src/adapters/bun.ts`

/** A started runtime: its base URL, output, and an idempotent stop. */
export interface RuntimeProcess {
  readonly baseUrl: string
  output(): string
  stop(): Promise<void>
}

/** A free TCP port on 127.0.0.1 (released before use; fine for tests). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))))
    })
  })
}

function start(cmd: string, args: string[], env: Record<string, string>): { proc: ChildProcess; output: () => string } {
  // Its own process group: node_modules/.bin/workerd is a Node shim that runs the native binary as its
  // child, so a stop signals the whole group (a signal to the shim alone left workerd running).
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let out = ''
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()))
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()))
  proc.once('error', (e) => (out += `\nspawn error: ${e.message}`))
  return { proc, output: () => out }
}

/** Poll `url` until it answers (any status), the process exits, or the time is up. */
async function waitHttp(url: string, p: { proc: ChildProcess; output: () => string }, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (p.proc.exitCode !== null || p.proc.signalCode !== null) {
      throw new Error(`${p.proc.spawnfile} exited (${p.proc.exitCode ?? p.proc.signalCode}):\n${p.output()}`)
    }
    const ok = await fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
      () => true,
      () => false,
    )
    if (ok) {
      return
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms:\n${p.output()}`)
}

function stopper(proc: ChildProcess): () => Promise<void> {
  let stopping: Promise<void> | undefined
  /** Signal the process group (see start); the leader alone if the group is gone. */
  const kill = (sig: NodeJS.Signals) => {
    try {
      process.kill(-proc.pid!, sig)
    } catch {
      proc.kill(sig)
    }
  }
  return () =>
    (stopping ??= new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        kill('SIGKILL') // what the leader may have left in its group
        resolve()
        return
      }
      const t = setTimeout(() => kill('SIGKILL'), 5_000)
      proc.once('exit', () => {
        clearTimeout(t)
        kill('SIGKILL') // the rest of the group, if the shim exited before its child
        resolve()
      })
      kill('SIGTERM')
    }))
}

/** Bundle the gateway, write a workerd config and run `workerd serve` on it. */
export async function startWorkerd(natsWsUrl: string, outDir: string): Promise<RuntimeProcess> {
  const port = await freePort()
  const config = await buildWorkerd({ outDir, port, natsWsUrl })
  const p = start(BIN('workerd'), ['serve', config, '--experimental'], {})
  const baseUrl = `http://127.0.0.1:${port}`
  const stop = stopper(p.proc)
  try {
    await waitHttp(`${baseUrl}/v2/health/live`, p, 60_000)
  } catch (e) {
    await stop()
    throw e
  }
  return { baseUrl, output: p.output, stop }
}

/** Run the Bun entry (Bun runs the TypeScript sources as they are). */
export async function startBun(natsWsUrl: string): Promise<RuntimeProcess> {
  const port = await freePort()
  const p = start(BIN('bun'), [BUN_ENTRY], { NATS_WS_URL: natsWsUrl, PORT: String(port), HOST: '127.0.0.1' })
  const baseUrl = `http://127.0.0.1:${port}`
  const stop = stopper(p.proc)
  try {
    await waitHttp(`${baseUrl}/v2/health/live`, p, 60_000)
  } catch (e) {
    await stop()
    throw e
  }
  return { baseUrl, output: p.output, stop }
}
