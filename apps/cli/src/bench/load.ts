import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { summarise, type LatencySummary } from './stats.ts'

/** Result of a saturation run. */
export interface SaturationResult {
  /** 'wrk' or the Node fallback. */
  tool: 'wrk' | 'node'
  requests: number
  seconds: number
  requestsPerSec: number
  p50Ms: number
  p99Ms: number
  /** Responses that were not 2xx/3xx (must be 0). */
  non2xx: number
  /** Socket errors (connect + read + write + timeout). */
  socketErrors: number
}

/** Whether `wrk` is on PATH. */
export function hasWrk(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' })
    return true
  } catch (e) {
    // `wrk --version` prints its usage and exits 1; only ENOENT means it is missing.
    return (e as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}

const live = new Set<ChildProcess>()

/** SIGKILL every wrk still running (cleanup on errors and Ctrl-C). */
export function killLoadGenerators(): void {
  for (const p of live) {
    p.kill('SIGKILL')
  }
  live.clear()
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

function ms(v: string | undefined, unit: string | undefined): number {
  return v === undefined || unit === undefined ? Number.NaN : Number(v) * (UNIT_MS[unit] ?? Number.NaN)
}

/** Parse wrk's text report (run with `--latency`). Exported for testing by hand. */
export function parseWrk(out: string): Omit<SaturationResult, 'tool'> {
  const rps = out.match(/Requests\/sec:\s+([\d.]+)/)
  const total = out.match(/(\d+) requests in ([\d.]+)(us|ms|s|m|h)/)
  if (!rps || !total) {
    throw new Error(`cannot parse wrk output:\n${out}`)
  }
  const p50 = out.match(/^\s*50%\s+([\d.]+)(us|ms|s|m|h)\s*$/m)
  const p99 = out.match(/^\s*99%\s+([\d.]+)(us|ms|s|m|h)\s*$/m)
  const non2xx = out.match(/Non-2xx or 3xx responses:\s+(\d+)/)
  const sock = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
  return {
    requests: Number(total[1]),
    seconds: ms(total[2], total[3]) / 1000,
    requestsPerSec: Number(rps[1]),
    p50Ms: ms(p50?.[1], p50?.[2]),
    p99Ms: ms(p99?.[1], p99?.[2]),
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  }
}

/** Write the wrk Lua script that POSTs `body` as JSON; returns its path. */
export function writeWrkScript(dir: string, body: string): string {
  const path = join(dir, 'post.lua')
  writeFileSync(
    path,
    `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [==[${body}]==]\n`,
  )
  return path
}

/**
 * `wrk -t1 -c<connections> -d<seconds>s --latency -s <script> <url>`; rejects when wrk fails or
 * any response is not 2xx/3xx.
 */
export async function runWrk(url: string, script: string, connections: number, seconds: number): Promise<SaturationResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, url]
  const out = await new Promise<string>((resolve, reject) => {
    const p = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    live.add(p)
    p.once('exit', () => live.delete(p))
    let text = ''
    p.stdout.on('data', (d: Buffer) => (text += d.toString()))
    p.stderr.on('data', (d: Buffer) => (text += d.toString()))
    p.once('error', reject)
    p.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}:\n${text}`))))
  })
  const r = { tool: 'wrk' as const, ...parseWrk(out) }
  if (r.non2xx > 0) {
    throw new Error(`wrk got ${r.non2xx} non-2xx responses from ${url}; the served path is failing:\n${out}`)
  }
  return r
}

async function post(url: string, body: string): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await res.text()
  if (!res.ok) {
    throw new Error(`POST ${url}: HTTP ${res.status} ${text.slice(0, 300)}`)
  }
  return performance.now() - t0
}

/**
 * Fallback load generator when wrk is missing: `connections` concurrent fetch loops for
 * `seconds`. It shares the CPU with the server, so it understates served throughput.
 */
export async function runNodeLoad(url: string, body: string, connections: number, seconds: number): Promise<SaturationResult> {
  const lat: number[] = []
  const until = performance.now() + seconds * 1000
  const t0 = performance.now()
  let non2xx = 0
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < until) {
        try {
          lat.push(await post(url, body))
        } catch {
          non2xx++
        }
      }
    }),
  )
  const elapsed = (performance.now() - t0) / 1000
  const s = summarise(lat)
  if (non2xx > 0) {
    throw new Error(`node load generator got ${non2xx} failed responses from ${url}`)
  }
  return { tool: 'node', requests: lat.length, seconds: elapsed, requestsPerSec: lat.length / elapsed, p50Ms: s.p50Ms, p99Ms: s.p99Ms, non2xx, socketErrors: 0 }
}

/**
 * One request at a time: `count` requests, or (with `rate`) paced at `rate` per second for
 * `seconds`. Rejects on the first non-2xx answer. Returns the latency summary in ms.
 */
export async function sequential(
  url: string,
  body: string,
  o: { count: number } | { rate: number; seconds: number },
): Promise<LatencySummary> {
  const lat: number[] = []
  if ('count' in o) {
    for (let i = 0; i < o.count; i++) {
      lat.push(await post(url, body))
    }
    return summarise(lat)
  }
  const n = Math.max(1, Math.round(o.rate * o.seconds))
  const start = performance.now()
  for (let i = 0; i < n; i++) {
    const due = start + (i * 1000) / o.rate
    const wait = due - performance.now()
    if (wait > 0) {
      await new Promise((r) => setTimeout(r, wait))
    }
    lat.push(await post(url, body))
  }
  return summarise(lat)
}
