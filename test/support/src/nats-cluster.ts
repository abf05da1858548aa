import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const SCRIPTS = fileURLToPath(new URL('../../../infra/scripts/', import.meta.url))

/** One node of a {@link NatsClusterHandle}. */
export interface NatsClusterNode {
  /** 1, 2 or 3 (infra/nats/cluster/node-N.conf). */
  index: number
  url: string
  /** Monitoring base URL (`/healthz`, `/varz`, `/routez`, `/jsz`). */
  monitorUrl: string
  /** Websocket listener port (ws://, no TLS). */
  wsPort: number
  /** The nats-server process id (from its pid file). */
  pid(): number
}

/** The local NATS cluster of infra/scripts/cluster-up.sh, on ports picked for the test. */
export interface NatsClusterHandle {
  nodes: NatsClusterNode[]
  /** Client URLs of the started nodes, comma-separated (what `--nats` takes). */
  urls: string
  /** Passwords of the users of infra/nats/auth.conf. */
  passwords: { gateway: string; worker: string; admin: string }
  /** Run infra/scripts/cluster-check.sh once: its exit code and output. */
  check(): Promise<{ code: number; out: string }>
  /** Stop every node and remove the state dir (infra/scripts/cluster-down.sh --clean). Idempotent. */
  stop(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** Options of {@link startNatsCluster}. */
export interface NatsClusterOptions {
  /** Nodes to start (routes always name all three). @default [1, 2, 3] */
  nodes?: number[]
}

function sh(script: string, args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('bash', [join(SCRIPTS, script), ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (e, so, se) =>
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, out: `${so}${se}` }),
    )
  })
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })
}

/** A port base whose 34 ports (BASE..BASE+33, the layout of cluster-env.sh) are free now. */
async function freePortBase(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 400) * 100
    let ok = true
    for (let off = 0; off < 34 && ok; off++) {
      ok = await portFree(base + off)
    }
    if (ok) {
      return base
    }
  }
  throw new Error('no free range of 34 ports found for the NATS cluster')
}

/**
 * Start the 3-node cluster (or some of its nodes) with infra/scripts/cluster-up.sh on free ports,
 * with fresh passwords and a temp state dir; resolves once cluster-check.sh passes.
 */
export async function startNatsCluster(opts: NatsClusterOptions = {}): Promise<NatsClusterHandle> {
  const nodes = opts.nodes ?? [1, 2, 3]
  const base = await freePortBase()
  const state = mkdtempSync(join(tmpdir(), 'cohort-nats-cluster-'))
  const passwords = {
    gateway: `gw-${randomBytes(12).toString('hex')}`,
    worker: `wk-${randomBytes(12).toString('hex')}`,
    admin: `ad-${randomBytes(12).toString('hex')}`,
  }
  const env = {
    COHORT_NATS_STATE_DIR: state,
    COHORT_NATS_PORT_BASE: String(base),
    COHORT_NATS_NODES: nodes.join(' '),
    COHORT_NATS_GATEWAY_PASS: passwords.gateway,
    COHORT_NATS_WORKER_PASS: passwords.worker,
    COHORT_NATS_ADMIN_PASS: passwords.admin,
  }
  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= sh('cluster-down.sh', ['--clean'], env).then(() => rmSync(state, { recursive: true, force: true })))
  const up = await sh('cluster-up.sh', [], env)
  if (up.code !== 0) {
    const logs = nodes.map((i) => {
      try {
        return readFileSync(join(state, `node-${i}.log`), 'utf8')
          .split('\n')
          .slice(-15)
          .join('\n')
      } catch {
        return ''
      }
    })
    await stop()
    throw new Error(`cluster-up.sh failed (${up.code}):\n${up.out}\n${logs.join('\n')}`)
  }
  return {
    nodes: nodes.map((index) => ({
      index,
      url: `nats://127.0.0.1:${base + index - 1}`,
      monitorUrl: `http://127.0.0.1:${base + 20 + index - 1}`,
      wsPort: base + 30 + index - 1,
      pid: () => Number(readFileSync(join(state, `node-${index}.pid`), 'utf8').trim()),
    })),
    urls: nodes.map((i) => `nats://127.0.0.1:${base + i - 1}`).join(','),
    passwords,
    check: () => sh('cluster-check.sh', [], env),
    stop,
    [Symbol.asyncDispose]: stop,
  }
}
