import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { spawnCohort } from '@cohort/test-support'
import { CliError } from '@cohort/cli/cli-error'
import { demoBody, FLOOR_BODY } from './bodies.ts'
import { metricTotals, type MetricTotals } from './step-stats.ts'

/** The peers `cohort bench peers` knows (test/peers/servers/<peer>_server.py). */
export const PEERS = ['triton', 'ray', 'litserve', 'bentoml'] as const
export type Peer = (typeof PEERS)[number]
export type Variant = 'default' | 'tuned'

/** Batching settings of the tuned variants (the defaults variants set nothing). */
export interface Tuning {
  /** Max batch size of every tuned peer. @default 32 */
  maxBatchSize: number
  /** Batching delay (ms) of the tuned Triton, Ray and LitServe: Triton's
   * max_queue_delay_microseconds / 1000, Ray's batch_wait_timeout_s * 1000, LitServe's
   * batch_timeout * 1000. */
  delayMs: Record<'triton' | 'ray' | 'litserve', number>
  /** BentoML's max_latency_ms (it has no fixed delay: its dispatcher learns one). */
  bentomlMaxLatencyMs: number
}

/** One server under test: how to start it, where to POST, and how to read its batch counters. */
export interface Target {
  /** Row label: `cohort`, `triton`, `triton-tuned`, ... */
  name: string
  /** What it is, with its batching settings, for the report. */
  description: string
  /** Whether batching is on (the low-load p50 target compares against these). */
  batching: boolean
  /** Start it; resolves once `path` answers `body` with a 200. */
  start(log: (m: string) => void): Promise<RunningTarget>
  path: string
  body: string
  /** Speaks the Open Inference Protocol with model `demo` (perf_analyzer can drive it). */
  oip: boolean
  /** An Identity model on the same server (Cohort only): the transport floor the SLO is built from. */
  floor?: { path: string; body: string }
}

export interface RunningTarget {
  base: string
  /** Batch counters (`batchSum` items in `batchCount` batches); undefined when not available. */
  totals(): Promise<MetricTotals | undefined>
  /** Stop every process of the server. Idempotent. */
  stop: () => Promise<void>
}

const DEFAULT_DESCRIPTIONS: Record<Peer, string> = {
  triton: 'Triton 2.x via PyTriton 0.7: dynamic batcher + Python backend, defaults (max batch 4, no delay)',
  ray: 'Ray Serve 2.60 @serve.batch defaults (max batch 10, wait 10 ms; max_ongoing_requests 5)',
  litserve: 'LitServe 0.2.19 defaults (max_batch_size 1: no batching)',
  bentoml: 'BentoML 1.4 adaptive batching defaults (max batch 100, max_latency_ms 60000)',
}

/** The demo input's 256 floats, the same values as Cohort's OIP body. */
function demoFloats(): number[] {
  const oip = JSON.parse(demoBody()) as { inputs: [{ data: number[] }] }
  return oip.inputs[0].data
}

/** Request body of each peer for one item (JSON; Triton speaks OIP like Cohort). */
export function peerBody(peer: Peer): string {
  if (peer === 'triton') {
    return demoBody()
  }
  const xs = demoFloats()
  // A BentoML batchable API concatenates requests along dimension 0: one request = one row.
  return JSON.stringify({ input: peer === 'bentoml' ? [xs] : xs })
}

/** URL path of each peer's predict endpoint. */
export function peerPath(peer: Peer): string {
  return { triton: '/v2/models/demo/infer', ray: '/', litserve: '/predict', bentoml: '/predict' }[peer]
}

/** PEER_* environment of one peer variant (read by test/peers/servers/common.py). */
export function peerEnv(peer: Peer, variant: Variant, t: Tuning): Record<string, string> {
  if (variant === 'default') {
    return {}
  }
  if (peer === 'bentoml') {
    return { PEER_MAX_BATCH: String(t.maxBatchSize), PEER_MAX_LATENCY_MS: String(Math.ceil(t.bentomlMaxLatencyMs)) }
  }
  return { PEER_MAX_BATCH: String(t.maxBatchSize), PEER_MAX_DELAY_MS: String(t.delayMs[peer]) }
}

function describe(peer: Peer, variant: Variant, t: Tuning): string {
  if (variant === 'default') {
    return DEFAULT_DESCRIPTIONS[peer]
  }
  if (peer === 'bentoml') {
    return `BentoML tuned: max_batch_size ${t.maxBatchSize}, max_latency_ms ${Math.ceil(t.bentomlMaxLatencyMs)}`
  }
  const what = { triton: 'max_queue_delay_microseconds', ray: 'batch_wait_timeout_s', litserve: 'batch_timeout' }[peer]
  return `${peer} tuned: max batch ${t.maxBatchSize}, ${what} = ${t.delayMs[peer]} ms`
}

/** A free TCP port on 127.0.0.1 such that `port + 1` and `port + 2` were free too (Triton uses three). */
export async function freePortRun(n = 3): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = createServer()
      s.once('error', () => resolve(false))
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
    })
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 30_000)
    let ok = true
    for (let i = 0; i < n && ok; i++) {
      ok = await free(base + i)
    }
    if (ok) {
      return base
    }
  }
  throw new Error('no free port range found')
}

/** POST `body` until a 200 arrives, up to `timeoutMs`; `alive` false stops early. */
async function waitAnswer(url: string, body: string, timeoutMs: number, alive: () => string | undefined): Promise<void> {
  const until = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < until) {
    const dead = alive()
    if (dead !== undefined) {
      throw new Error(`server exited before it answered: ${dead}`)
    }
    try {
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(5000) })
      last = `HTTP ${r.status} ${(await r.text()).slice(0, 200)}`
      if (r.status === 200) {
        return
      }
    } catch (e) {
      last = String(e)
    }
    await new Promise((r) => setTimeout(r, 500))
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms: ${last}`)
}

/** Where the peer servers and their venv live. */
export function peersDir(root: string): { servers: string; python: string; bentoml: string } {
  const venv = join(root, 'test/peers/.venv/bin')
  return { servers: join(root, 'test/peers/servers'), python: join(venv, 'python'), bentoml: join(venv, 'bentoml') }
}

/** A peer variant as a {@link Target}: its Python server from test/peers/servers, in its own process group. */
export function peerTarget(peer: Peer, variant: Variant, t: Tuning, o: { root: string; modelPath: string }): Target {
  const name = variant === 'default' ? peer : `${peer}-tuned`
  const path = peerPath(peer)
  const body = peerBody(peer)
  const env = peerEnv(peer, variant, t)
  const batching = peer === 'litserve' ? variant === 'tuned' : true
  return {
    name,
    description: describe(peer, variant, t),
    batching,
    oip: peer === 'triton',
    path,
    body,
    async start(log) {
      const dirs = peersDir(o.root)
      if (!existsSync(dirs.python)) {
        throw new CliError(`${dirs.python} is missing: run test/peers/setup.sh first`)
      }
      const port = await freePortRun(3)
      const statsPort = await freePortRun(1)
      const proc = spawnPeer(peer, dirs, { ...env, PEER_MODEL: o.modelPath, PEER_PORT: String(port), PEER_STATS_PORT: String(statsPort) }, port)
      let out = ''
      const keep = (d: Buffer) => {
        out = (out + d.toString()).slice(-20_000)
      }
      proc.stdout.on('data', keep)
      proc.stderr.on('data', keep)
      let exitCode: string | undefined
      const exited = new Promise<void>((r) =>
        proc.once('exit', (code, sig) => {
          exitCode = `${sig ?? code}`
          r()
        }),
      )
      let stopping: Promise<void> | undefined
      const stop = () =>
        (stopping ??= (async () => {
          if (exitCode !== undefined || proc.pid === undefined) {
            return
          }
          // The whole process group: Ray's raylet and workers, BentoML's worker, Triton's server.
          const group = (sig: NodeJS.Signals) => {
            try {
              process.kill(-(proc.pid as number), sig)
            } catch {
              // already gone
            }
          }
          group('SIGTERM')
          const killed = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))])
          if (!killed) {
            log(`${name}: still running 15 s after SIGTERM; SIGKILL`)
          }
          group('SIGKILL')
          await exited
        })())
      const base = `http://127.0.0.1:${port}`
      try {
        await waitAnswer(base + path, body, 180_000, () => exitCode && `exit ${exitCode}\n${out.slice(-3000)}`)
      } catch (e) {
        await stop()
        throw new Error(`${name}: ${e instanceof Error ? e.message : String(e)}\n${out.slice(-3000)}`)
      }
      const statsUrl = `http://127.0.0.1:${statsPort}/`
      return { base, stop, totals: () => peerTotals(statsUrl) }
    },
  }
}

/**
 * The peer's Python server (bentoml serve, or python SERVER.py) in its own process group, with
 * `env` (its tuning, model and ports) on top of the environment and telemetry off.
 */
function spawnPeer(peer: Peer, dirs: ReturnType<typeof peersDir>, env: Record<string, string>, port: number) {
  const [cmd, args] =
    peer === 'bentoml'
      ? [dirs.bentoml, ['serve', 'bentoml_server:Demo', '--host', '127.0.0.1', '--port', String(port)]]
      : [dirs.python, [join(dirs.servers, `${peer === 'triton' ? 'pytriton' : peer}_server.py`)]]
  return spawn(cmd, args, {
    cwd: dirs.servers,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...env,
      PYTHONPATH: dirs.servers,
      OMP_NUM_THREADS: '1',
      RAY_USAGE_STATS_ENABLED: '0',
      BENTOML_DO_NOT_TRACK: 'true',
      LITSERVE_DISABLE_TELEMETRY: '1',
    },
  })
}

/** A peer's batch counters from its stats port; undefined when it does not answer. */
async function peerTotals(statsUrl: string): Promise<MetricTotals | undefined> {
  try {
    const r = await fetch(statsUrl, { signal: AbortSignal.timeout(2000) })
    const s = (await r.json()) as { batches: number; items: number }
    return { ...EMPTY_TOTALS, batchSum: s.items, batchCount: s.batches, shed: {} }
  } catch {
    return undefined
  }
}

const EMPTY_TOTALS: MetricTotals = { batchSum: 0, batchCount: 0, computeSum: 0, computeCount: 0, requestSum: 0, requestCount: 0, costA: Number.NaN, costC: Number.NaN, shed: {} }

/**
 * Cohort at its defaults (`cohort serve --threads 1`), serving the demo MLP and the Identity floor
 * model; with `sloMs`, "cohort-tuned": the same with the bench's SLO as the server-side SLO
 * (`--slo-ms`, the deadline of a request whose client sends none), as tuned BentoML gets it as its
 * `max_latency_ms`. The tuned one runs no floor (the SLO is fixed by then).
 */
export function cohortTarget(o: { modelPath: string; floorPath: string; sloMs?: number }): Target {
  const tuned = o.sloMs !== undefined
  return {
    name: tuned ? 'cohort-tuned' : 'cohort',
    description: tuned
      ? `Cohort tuned: --slo-ms ${(o.sloMs as number).toFixed(1)} (the bench's SLO as the server-side SLO)`
      : 'Cohort `cohort serve --threads 1` defaults (OIP JSON)',
    batching: true,
    oip: true,
    path: '/v2/models/demo/infer',
    body: demoBody(),
    ...(tuned ? {} : { floor: { path: '/v2/models/floor/infer', body: FLOOR_BODY } }),
    async start() {
      const slo = tuned ? ['--slo-ms', String(o.sloMs)] : []
      const p = spawnCohort(['serve', '--port', '0', '--model', `demo=${o.modelPath}`, '--model', `floor=${o.floorPath}`, '--threads', '1', ...slo])
      let stopping: Promise<void> | undefined
      const stop = () => (stopping ??= p.stop('SIGTERM', 5000).then(() => undefined))
      try {
        const m = await p.waitFor(/serving .* on (http:\/\/\S+) \(embedded\)/, 60_000)
        const base = m[1] as string
        await waitAnswer(`${base}/v2/models/demo/infer`, demoBody(), 30_000, () => undefined)
        return { base, stop, totals: () => metricTotals(`${base}/metrics`, 'demo') }
      } catch (e) {
        await stop()
        throw e
      }
    },
  }
}

/** Parse `--peers` (comma-separated, from {@link PEERS}). */
export function parsePeers(v: string): Peer[] {
  const out = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const p of out) {
    if (!(PEERS as readonly string[]).includes(p)) {
      throw new CliError(`--peers: unknown peer "${p}" (use ${PEERS.join(', ')})`)
    }
  }
  return out as Peer[]
}

/** Parse `--variants` (default, tuned). */
export function parseVariants(v: string): Variant[] {
  const out = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const x of out) {
    if (x !== 'default' && x !== 'tuned') {
      throw new CliError(`--variants: unknown variant "${x}" (use default, tuned)`)
    }
  }
  return out as Variant[]
}
