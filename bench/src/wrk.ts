import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

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

/**
 * Write a wrk Lua script `<name>.lua` in `dir` that POSTs `body` as JSON, with `headers` (e.g.
 * `Authorization`) besides its Content-Type; returns its path.
 */
export function writeWrkScript(dir: string, name: string, body: string, headers: Record<string, string> = {}): string {
  const path = join(dir, `${name}.lua`)
  const extra = Object.entries(headers)
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}\n`)
    .join('')
  writeFileSync(path, `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n${extra}wrk.body = [==[${body}]==]\n`)
  return path
}

/**
 * Write a wrk Lua script that POSTs a binary tensor-extension body (every byte escaped as `\ddd`,
 * so no newline translation can touch it); returns its path.
 */
export function writeWrkBinaryScript(dir: string, name: string, body: { bytes: Uint8Array; headerLength: number }): string {
  const path = join(dir, `${name}.lua`)
  let lit = ''
  for (const b of body.bytes) {
    lit += `\\${b}`
  }
  writeFileSync(
    path,
    `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/octet-stream"\n` +
      `wrk.headers["Inference-Header-Content-Length"] = "${body.headerLength}"\nwrk.body = "${lit}"\n`,
  )
  return path
}

/**
 * `wrk -t1 -c<connections> -d<seconds>s --latency -s <script> <url>`; rejects when wrk fails or
 * (unless `allowNon2xx`) any response is not 2xx/3xx. `timeoutS`: wrk's `--timeout` (its default, 2 s,
 * drops slower answers from the count as socket timeouts). `prefix`: a command in front (`taskset -c 0`).
 */
export async function runWrk(
  url: string,
  script: string,
  connections: number,
  seconds: number,
  o: { allowNon2xx?: boolean; timeoutS?: number; prefix?: string[] } = {},
): Promise<SaturationResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, ...(o.timeoutS !== undefined ? ['--timeout', `${o.timeoutS}s`] : []), '--latency', '-s', script, url]
  const [cmd, ...pre] = o.prefix && o.prefix.length > 0 ? [...o.prefix, 'wrk'] : ['wrk']
  const out = await new Promise<string>((resolve, reject) => {
    const p = spawn(cmd, [...pre, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    live.add(p)
    p.once('exit', () => live.delete(p))
    let text = ''
    p.stdout.on('data', (d: Buffer) => (text += d.toString()))
    p.stderr.on('data', (d: Buffer) => (text += d.toString()))
    p.once('error', reject)
    p.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}:\n${text}`))))
  })
  const r = { tool: 'wrk' as const, ...parseWrk(out) }
  if (r.non2xx > 0 && !o.allowNon2xx) {
    throw new Error(`wrk got ${r.non2xx} non-2xx responses from ${url}; the served path is failing:\n${out}`)
  }
  return r
}
