import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import type { StepRecords } from './overload-stats.ts'

/**
 * vegeta (github.com/tsenart/vegeta), the open-loop HTTP load generator of `cohort bench overload`:
 * found on PATH or in the CI cache's bin, else built there once with `go install` (the cache and
 * the way scripts/ci/install.sh builds the nats CLI). A Go process, so the load generator does not
 * share Node's event loop costs with what it measures.
 * @module
 */

/** The vegeta release the bench builds when none is found. */
export const VEGETA_VERSION = 'v12.13.0'

/** The CI cache's bin (scripts/ci/cache.sh: COHORT_CI_CACHE, default ~/.cache/cohort-ci). */
export function cacheBin(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env['COHORT_CI_CACHE'] ?? join(env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'cohort-ci')
  return join(cache, 'bin')
}

function onPath(name: string): string | undefined {
  for (const d of (process.env['PATH'] ?? '').split(':')) {
    if (d && existsSync(join(d, name))) {
      return join(d, name)
    }
  }
  return undefined
}

/**
 * The vegeta binary: PATH, then the cache's bin; else `go install github.com/tsenart/vegeta/v12@<version>`
 * into the cache's bin (a cold Go module cache takes a minute or two). Throws saying what to do
 * when Go is missing or the Go proxy cannot be reached.
 */
export function ensureVegeta(log: (s: string) => void): string {
  const found = onPath('vegeta') ?? (existsSync(join(cacheBin(), 'vegeta')) ? join(cacheBin(), 'vegeta') : undefined)
  if (found) {
    return found
  }
  const bin = cacheBin()
  mkdirSync(bin, { recursive: true })
  log(`building vegeta ${VEGETA_VERSION} (go install github.com/tsenart/vegeta/v12@${VEGETA_VERSION} into ${bin})`)
  try {
    execFileSync('go', ['install', `github.com/tsenart/vegeta/v12@${VEGETA_VERSION}`], { env: { ...process.env, GOBIN: bin }, stdio: ['ignore', 'ignore', 'pipe'] })
  } catch (e) {
    const err = (e as { stderr?: Buffer }).stderr?.toString() ?? String(e)
    throw new Error(`cohort bench overload needs vegeta; go install failed (is Go installed and the Go proxy reachable?): ${err.slice(-400)}`)
  }
  return join(bin, 'vegeta')
}

/** Write a vegeta targets file (its HTTP format) POSTing `body` to `url` with `headers`; its path. */
export function writeVegetaTargets(dir: string, name: string, url: string, body: string, headers: Record<string, string>): string {
  const bodyPath = join(dir, `${name}.body.json`)
  writeFileSync(bodyPath, body)
  const path = join(dir, `${name}.targets`)
  const lines = [`POST ${url}`, 'Content-Type: application/json', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), `@${bodyPath}`, '']
  writeFileSync(path, lines.join('\n'))
  return path
}

/** One vegeta result (`vegeta encode --to json`). */
export interface VegetaHit {
  /** When the request was sent, ms since the epoch (fractional). */
  atMs: number
  /** HTTP status; 0 when there was no response (timeout, connection error: `error`). */
  code: number
  latencyMs: number
  error: string
  /** The error body's `code` (e.g. `OVERLOADED`, `DEADLINE_EXCEEDED`) of a non-200 answer; '' for 200s, no answer, or a body without one. */
  errorCode: string
}

/**
 * Which step refused a 503 OVERLOADED, from its message: the gateway's door checks name themselves
 * (apps/gateway/src/wait-check.ts, door.ts, lag-check.ts, admission.ts, the listener's connection
 * bound); anything else came back from a worker after the door let the request in.
 */
export function refusalCheck(message: string): string {
  if (message.includes('(worker-wait check)')) {
    return 'worker_wait'
  }
  if (message.includes('(arrival-wait check)') || message.includes('before it was read')) {
    return 'arrival_wait'
  }
  if (message.includes('the gateway is saturated')) {
    return 'event_loop_lag'
  }
  if (message.includes('in-flight bound')) {
    return 'inflight'
  }
  if (message.includes('open-connections bound')) {
    return 'connections'
  }
  return 'worker'
}

/**
 * The `code` of a JSON error body (`{ code }` or `{ error: { code } }`), read only for non-200
 * answers; '' when absent. A 503 OVERLOADED is told apart by the step that refused it
 * (`OVERLOADED worker_wait`, {@link refusalCheck}), so a slow refusal's source shows.
 */
export function bodyErrorCode(status: number, base64Body: string | undefined): string {
  if (status === 200 || status === 0 || !base64Body) {
    return ''
  }
  try {
    const b = JSON.parse(Buffer.from(base64Body, 'base64').toString('utf8')) as { code?: unknown; error?: unknown }
    const e = b.error
    const c = b.code ?? (typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined)
    if (c !== 'OVERLOADED') {
      return typeof c === 'string' ? c : ''
    }
    const inner = typeof e === 'object' && e !== null ? (e as { message?: unknown }).message : undefined
    const message = typeof e === 'string' ? e : typeof inner === 'string' ? inner : ''
    return `OVERLOADED ${refusalCheck(message)}`
  } catch {
    return ''
  }
}

/** RFC 3339 with up to nanoseconds, to fractional epoch ms (Date.parse keeps only ms). */
function epochMs(ts: string): number {
  const m = /^(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(ts)
  if (!m) {
    return Date.parse(ts)
  }
  const frac = m[2] ? Number(`0.${m[2]}`) * 1000 : 0
  return Date.parse(`${m[1]}${m[3]}`) + frac
}

/** Parse `vegeta encode --to json` output (one JSON object per line). */
export function parseVegetaJson(text: string): VegetaHit[] {
  const out: VegetaHit[] = []
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      continue
    }
    const r = JSON.parse(line) as { timestamp: string; code: number; latency: number; error?: string; body?: string }
    out.push({ atMs: epochMs(r.timestamp), code: r.code, latencyMs: r.latency / 1e6, error: r.error ?? '', errorCode: bodyErrorCode(r.code, r.body) })
  }
  return out.sort((a, b) => a.atMs - b.atMs)
}

/**
 * vegeta's hits as the step records of `summariseOverloadStep`: send times from the first hit, and
 * no answer as status 0 when vegeta gave up waiting (its -timeout) and -1 for a connection error
 * (both have no latency). vegeta is open loop with enough workers (`-max-workers`), so its send
 * time is the schedule (no generator lag is recorded).
 */
export function vegetaRecords(hits: VegetaHit[], durationS: number, t0Ms = hits[0]?.atMs ?? 0): StepRecords {
  const timeout = (h: VegetaHit) => /timeout|deadline exceeded/i.test(h.error)
  return {
    scheduledMs: hits.map((h) => h.atMs - t0Ms),
    latencyMs: hits.map((h) => (h.code === 0 ? Number.NaN : h.latencyMs)),
    status: hits.map((h) => (h.code !== 0 ? h.code : timeout(h) ? 0 : -1)),
    errorCode: hits.map((h) => h.errorCode),
    waitedMs: hits.map((h) => h.latencyMs),
    durationS,
  }
}

/** What to attack with (one vegeta process). */
export interface VegetaAttack {
  vegeta: string
  targets: string
  /** Requests per second (fractions kept: sent as N per 10 s). */
  rate: number
  durationS: number
  /** How long vegeta waits for an answer, s. @default 10 */
  timeoutS?: number
  /** Where the binary results go. */
  output: string
  /** A command in front (e.g. `taskset -c 0`). */
  prefix?: string[]
}

/** A running attack: its pid (to meter its CPU) and its hits once it ended. */
export interface RunningAttack {
  pid: number | undefined
  done: Promise<VegetaHit[]>
  proc: ChildProcess
}

const live = new Set<ChildProcess>()

/** SIGKILL every vegeta attack still running (cleanup on errors and Ctrl-C). */
export function killAttacks(): void {
  for (const p of live) {
    p.kill('SIGKILL')
  }
  live.clear()
}

/** `vegeta attack` (open loop), then `vegeta encode --to json` of its results. */
export function attack(a: VegetaAttack): RunningAttack {
  const args = [
    'attack',
    `-targets=${a.targets}`,
    `-rate=${Math.max(1, Math.round(a.rate * 10))}/10s`,
    `-duration=${a.durationS}s`,
    `-timeout=${a.timeoutS ?? 10}s`,
    '-max-workers=4096',
    `-output=${a.output}`,
  ]
  const [cmd, ...pre] = a.prefix && a.prefix.length > 0 ? [...a.prefix, a.vegeta] : [a.vegeta]
  const proc = spawn(cmd, [...pre, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  live.add(proc)
  proc.once('exit', () => live.delete(proc))
  let err = ''
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const done = new Promise<void>((resolve, reject) => {
    proc.once('error', reject)
    proc.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`vegeta attack exited with ${code}: ${err.slice(-400)}`))))
  }).then(() => {
    const json = execFileSync(a.vegeta, ['encode', '--to', 'json', a.output], { maxBuffer: 1024 ** 3 })
    return parseVegetaJson(json.toString())
  })
  return { pid: proc.pid, done, proc }
}
