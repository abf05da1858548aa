// Processes on the test hosts of netns.ts: nats-server nodes (one, or a 3-node cluster), cohort
// workers and gateways, each started with `ip netns exec <host> ...`; a Lab owns them all and its
// close() kills every process and removes every namespace (idempotent, also after a failure).
import type { ChildProcess } from 'node:child_process'
import { spawnProcess, cohortArgs } from '@cohort/test-support'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Network, type Host } from './netns.ts'

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
/** The sleep-based synthetic predictor: a batch costs SLEEPY_MS (+ the largest `sleepMs`); y = 2x. */
export const SLEEPY = join(ROOT, 'test/fixtures/sleepy-predictor.ts')

/** A process on a test host. */
export interface HostProcess {
  readonly label: string
  readonly host: Host
  readonly proc: ChildProcess
  output(): string
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Kill with a signal and wait for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>
  /** Resident memory, KiB (VmRSS), or undefined once gone. */
  rssKiB(): number | undefined
  readonly exited: Promise<number | null>
}

/** Client ping settings for the test servers: a cut-off client is dropped after ~2-3 s. */
const PING = ['ping_interval: "1s"', 'ping_max: 2']

/** The test network with its processes. */
export class Lab {
  readonly net: Network
  readonly procs: HostProcess[] = []
  readonly #dir = mkdtempSync(join(tmpdir(), 'cohort-netns-'))
  #closed = false

  constructor() {
    this.net = Network.create()
    // If the test process dies without close(), do not leave processes running in the namespaces.
    process.once('exit', () => {
      for (const p of this.procs) p.proc.kill('SIGKILL')
      this.net.close()
    })
  }

  /** Start a process on a host. */
  start(hostName: string, argv: string[], label: string, env: Record<string, string> = {}): HostProcess {
    const host = this.net.host(hostName)
    const [cmd, ...pre] = this.net.exec(hostName)
    const p = spawnProcess(cmd!, [...pre, ...argv], { cwd: ROOT, env, label, waitTimeoutMs: 60_000, maxOutputChars: 200_000 })
    const proc = p.proc
    const hp: HostProcess = {
      label,
      host,
      proc,
      output: () => p.output(),
      exited: p.exited,
      waitFor: (re, timeoutMs) => p.waitFor(re, timeoutMs),
      kill: async (signal = 'SIGTERM') => {
        await p.stop(signal, 10_000)
      },
      rssKiB: () => {
        try {
          const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))
          return m ? Number(m[1]) : undefined
        } catch {
          return undefined
        }
      },
    }
    this.procs.push(hp)
    return hp
  }

  /**
   * nats-server nodes on the given hosts (a cluster when more than one), without JetStream, with
   * short client pings. Resolves once each listens; returns the client URLs.
   */
  async nats(hostNames: string[], o: { jetstream?: boolean } = {}): Promise<{ urls: string[]; nodes: HostProcess[] }> {
    const hosts = hostNames.map((h) => this.net.host(h))
    const nodes = hosts.map((h) => {
      const routes = hosts.filter((o) => o !== h).map((o) => `"nats://${o.ip}:6222"`)
      const conf = [
        `server_name: ${h.name}`,
        'listen: 0.0.0.0:4222',
        'http: 0.0.0.0:8222',
        ...PING,
        ...(hosts.length > 1 ? [`cluster { name: cohort-netns, listen: 0.0.0.0:6222, routes: [${routes.join(', ')}] }`] : []),
        ...(o.jetstream ? [`jetstream { store_dir: "${join(this.#dir, `js-${h.name}`)}" }`] : []),
      ]
      const file = join(this.#dir, `nats-${h.name}.conf`)
      writeFileSync(file, conf.join('\n') + '\n')
      return this.start(h.name, ['nats-server', '-c', file], `nats-${h.name}`)
    })
    await Promise.all(nodes.map((n) => n.waitFor(/Server is ready/, 20_000)))
    if (hosts.length > 1) {
      await Promise.all(nodes.map((n) => n.waitFor(new RegExp(`Route connection created|rid:`), 20_000).catch(() => undefined)))
    }
    if (o.jetstream) {
      // JetStream is usable once every node reports healthy (a metadata leader elected, streams current).
      const until = Date.now() + 60_000
      for (const h of hosts) {
        while (
          (await fetch(`http://${h.ip}:8222/healthz`).then(
            (r) => r.status,
            () => 0,
          )) !== 200
        ) {
          if (Date.now() > until) throw new Error(`JetStream on ${h.name} not healthy within 60 s`)
          await new Promise((r) => setTimeout(r, 200))
        }
      }
    }
    return { urls: hosts.map((h) => `nats://${h.ip}:4222`), nodes }
  }

  /** Names of the clients connected to the nats-server on a host (its monitoring `/connz`). */
  async clients(hostName: string): Promise<string[]> {
    const r = await fetch(`http://${this.net.host(hostName).ip}:8222/connz?limit=1024`)
    const b = (await r.json()) as { connections?: { name?: string }[] }
    return (b.connections ?? []).map((c) => c.name ?? '')
  }

  /** A `cohort worker` serving the sleepy predictor; resolves once it serves. */
  async worker(hostName: string, urls: string[], id: string, o: { sleepMs?: number; args?: string[]; env?: Record<string, string> } = {}): Promise<HostProcess> {
    const p = this.start(hostName, [process.execPath, ...cohortArgs(), 'worker', '--nats', urls.join(','), '--id', id, '--predictor', SLEEPY, ...(o.args ?? [])], `worker-${id}`, {
      SLEEPY_MS: String(o.sleepMs ?? 25),
      ...o.env,
    })
    await p.waitFor(/serving sleepy/, 60_000)
    return p
  }

  /** A `cohort gateway` on a host, listening on its address; resolves with its base URL. */
  async gateway(hostName: string, urls: string[], args: string[] = []): Promise<{ url: string; proc: HostProcess }> {
    const host = this.net.host(hostName)
    const p = this.start(hostName, [process.execPath, ...cohortArgs(), 'gateway', '--nats', urls.join(','), '--host', host.ip, '--port', '8080', ...args], 'gateway')
    await p.waitFor(/gateway on http/, 60_000)
    return { url: `http://${host.ip}:8080`, proc: p }
  }

  /** Kill every process (SIGKILL), remove every namespace and temp file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await Promise.all(this.procs.map((p) => p.kill('SIGKILL').catch(() => undefined)))
    this.net.close()
    rmSync(this.#dir, { recursive: true, force: true })
  }
}
