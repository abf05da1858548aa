import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { graph, mulberry32, model, node, valueInfo } from '@cohort/onnx-builder'
import { intFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureHeavyModel } from '@cohort/cli/demo-model'
import { COHORT_BIN, cohortArgs } from '@cohort/test-support'
import { BENCH_BIN } from './bin-path.ts'
import { gitCommit } from './run-info.ts'
import { categoriseProfile, printProfiles, summariseProfiles } from './profile.ts'
import { hasWrk, runWrk, writeWrkBinaryScript, writeWrkScript } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchValues } from './skeleton.ts'
import { waitReady } from './served.ts'

/** Help of `cohort bench tax`. */
export const TAX_HELP = `cohort bench tax [options]
The serving tax (docs/benchmarks.md#serving-tax): CPU per request of each process on the path, in one
run, for a bare node:http server, plain nats.js request-reply, cohort serve (embedded) and
cohort gateway + nats-server + cohort worker, with ratios against the floors.
  --targets LIST     comma-separated, run in the order given (default http,nats,serve,dist):
                       http    bare node:http floor       nats    nats.js request-reply floor
                       serve   cohort serve (embedded)    dist    gateway + nats-server + worker
                       dist2   dist with cohort gateway --processes 2 (the primary and each child)
                       grpc    dist through the gateway's OIP gRPC server (@grpc/grpc-js load, one channel)
                       bulk    dist through POST /models/m/predictions/bulk (CPU per item)
                       triton  Triton through PyTriton (test/peers/.venv; skipped, saying why, without it)
  --seconds S        measured seconds per target at saturation (default 3)
  --connections N    wrk connections at saturation; nats.js floor requests in flight (default 64)
  --model identity|heavy  Identity on 64 floats (default), or the heavy benchmark MLP (512 floats)
  --binary           send the binary tensor data extension instead of OIP JSON (Cohort targets)
  --rows N           rows per request (input shape [N, features]; default 1)
  --bulk-items N     inputs per bulk request (target bulk; default 16)
  --profile          run the Cohort processes under --cpu-prof and print top self times
  --base DIR         also run serve, dist and bulk from the Cohort checkout DIR (before/after, side by side)
  --repeat N         run every target N times, interleaved, and report the median of each number (default 1)
  --out FILE         also write the results as JSON`

/** One process of a target, with its CPU time. */
interface ProcCpu {
  name: string
  /** CPU µs per request (utime + stime delta over the measured window). */
  usPerRequest: number
}

/** The result of one target. */
export interface TaxTarget {
  target: string
  requestsPerSec: number
  /** Items per request (bulk). */
  items: number
  procs: ProcCpu[]
  totalUsPerRequest: number
  /** NATS messages published (in_msgs) and delivered (out_msgs) per request; NaN without NATS. */
  natsInPerRequest: number
  natsOutPerRequest: number
  /** p50 at concurrency 1, ms. */
  p50Ms: number
  /** Bulk: the CPU, NATS and rate figures are per item (requestsPerSec is items/s). */
  perItem?: boolean
}

const CLK_TCK = 100

/** utime + stime of a process, in µs (Linux /proc). */
export function cpuMicros(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
  return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK
}

/** A child process of a benchmark, with its output collected (tax.ts and overload.ts). */
export interface Proc {
  name: string
  proc: ChildProcess
  out: () => string
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>
  stop(): Promise<void>
}

const live = new Set<Proc>()

/** The pid of a started child (one that failed to spawn has none). */
export function pidOf(proc: ChildProcess): number {
  if (proc.pid === undefined) {
    throw new Error(`${proc.spawnfile} did not start (no pid)`)
  }
  return proc.pid
}

/** Group `i` of a `waitFor` match: what the process printed (an address, a JSON line...). */
export function matched(m: RegExpMatchArray, i = 1): string {
  const s = m[i]
  if (s === undefined) {
    throw new Error(`no group ${i} in the line "${m[0]}"`)
  }
  return s
}

/** CPU µs per request of each meter from its CPU µs before and after (NaN where one is missing). */
function perRequest(meters: readonly { name: string }[], cpu0: readonly number[], cpu1: readonly number[], n: number): ProcCpu[] {
  return meters.map((p, i) => ({ name: p.name, usPerRequest: ((cpu1[i] ?? Number.NaN) - (cpu0[i] ?? Number.NaN)) / n }))
}

/** Spawn `cmd args` as a tracked {@link Proc} (stdout and stderr collected), with `env` added to this process's. */
export function start(name: string, cmd: string, args: string[], stdin = false, env?: Record<string, string>): Proc {
  const proc = spawn(cmd, args, { stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'], ...(env ? { env: { ...process.env, ...env } } : {}) })
  let text = ''
  const listeners = new Set<() => void>()
  const on = (d: Buffer) => {
    text += d.toString()
    for (const l of [...listeners]) {
      l()
    }
  }
  proc.stdout?.on('data', on)
  proc.stderr?.on('data', on)
  const exited = new Promise<void>((r) => proc.once('exit', () => r()))
  let stopping: Promise<void> | undefined
  const p: Proc = {
    name,
    proc,
    out: () => text,
    waitFor: (re, ms = 60_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(new Error(`${name}: timed out waiting for ${re}:\n${text}`))
        }, ms)
        const check = () => {
          const m = text.match(re)
          if (m) {
            clearTimeout(timer)
            listeners.delete(check)
            resolve(m)
          } else if (proc.exitCode !== null) {
            clearTimeout(timer)
            listeners.delete(check)
            reject(new Error(`${name} exited before ${re}:\n${text}`))
          }
        }
        listeners.add(check)
        proc.once('exit', check)
        check()
      }),
    stop: () =>
      (stopping ??= (async () => {
        live.delete(p)
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGTERM')
          const t = setTimeout(() => proc.kill('SIGKILL'), 10_000)
          await exited
          clearTimeout(t)
        }
      })()),
  }
  live.add(p)
  return p
}

/** Stop processes, last started first. */
export async function stopAll(ps: Proc[]): Promise<void> {
  for (const p of [...ps].reverse()) {
    await p.stop()
  }
}

/** nats-server on random ports with monitoring on; returns its client and monitoring URLs. */
export async function startNats(dir: string): Promise<{ p: Proc; url: string; varz: string }> {
  const d = mkdtempSync(join(dir, 'nats-'))
  writeFileSync(join(d, 'server.conf'), `listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nports_file_dir: "${d}"\n`)
  const p = start('nats-server', 'nats-server', ['-c', join(d, 'server.conf')])
  const until = Date.now() + 10_000
  while (Date.now() < until) {
    const f = readdirSync(d).find((n) => n.endsWith('.ports'))
    if (f) {
      try {
        const ports = JSON.parse(readFileSync(join(d, f), 'utf8')) as { nats?: string[]; monitoring?: string[] }
        if (ports.nats?.[0] && ports.monitoring?.[0]) {
          return { p, url: ports.nats[0], varz: `${ports.monitoring[0]}/varz` }
        }
      } catch {
        // Partly written.
      }
    }
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error('nats-server wrote no ports file')
}

export async function varz(url: string): Promise<{ in: number; out: number }> {
  const v = (await (await fetch(url)).json()) as { in_msgs: number; out_msgs: number }
  return { in: v.in_msgs, out: v.out_msgs }
}

/** An Identity ONNX model of `features` FP32 (`in` -> `out`) written in `dir`; its path. */
export function identityModel(dir: string, features: number): string {
  const path = join(dir, 'identity.onnx')
  writeFileSync(
    path,
    model(
      graph({
        name: 'cohort_bench_tax_identity',
        inputs: [valueInfo('in', 'FP32', ['batch', features])],
        outputs: [valueInfo('out', 'FP32', ['batch', features])],
        nodes: [node('Identity', ['in'], ['out'])],
      }),
    ),
  )
  return path
}

interface Bodies {
  script: string
  /** Single-item body for the c=1 latency run. */
  script1: string
}

function bodies(dir: string, name: string, input: string, features: number, items: number, binary: boolean): Bodies {
  const make = (n: number, tag: string) => {
    const r = mulberry32(7)
    const data = Array.from({ length: n * features }, () => Math.fround(r() * 2 - 1))
    if (!binary) {
      return writeWrkScript(dir, `${name}-${tag}`, JSON.stringify({ inputs: [{ name: input, datatype: 'FP32', shape: [n, features], data }] }))
    }
    const f = Float32Array.from(data)
    const header = new TextEncoder().encode(JSON.stringify({ inputs: [{ name: input, datatype: 'FP32', shape: [n, features], parameters: { binary_data_size: f.byteLength } }] }))
    const bytes = new Uint8Array(header.byteLength + f.byteLength)
    bytes.set(header, 0)
    bytes.set(new Uint8Array(f.buffer), header.byteLength)
    return writeWrkBinaryScript(dir, `${name}-${tag}`, { bytes, headerLength: header.byteLength })
  }
  return { script: make(items, 'n'), script1: make(1, '1') }
}

interface Cfg {
  targets: string[]
  seconds: number
  connections: number
  model: 'identity' | 'heavy'
  binary: boolean
  bulk: number
  bulkItems: number
  profile: boolean
  out: string | undefined
  base: string | undefined
  repeat: number
}

const TAX_OPTIONS = {
  targets: { type: 'string' },
  seconds: { type: 'string' },
  connections: { type: 'string' },
  model: { type: 'string' },
  binary: { type: 'boolean' },
  rows: { type: 'string' },
  'bulk-items': { type: 'string' },
  profile: { type: 'boolean' },
  out: { type: 'string' },
  base: { type: 'string' },
  repeat: { type: 'string' },
} satisfies BenchCommand['options']

const TARGETS = ['http', 'nats', 'serve', 'dist', 'dist2', 'grpc', 'bulk', 'triton']
/** Targets that run Cohort processes (profiled with --profile, run again from --base). */
const COHORT_TARGETS = new Set(['serve', 'dist', 'dist2', 'grpc', 'bulk'])
/** Targets `--base DIR` runs again from DIR (those an older checkout has the flags of). */
const BASE_TARGETS = new Set(['serve', 'dist', 'bulk'])

function config(v: BenchValues): Cfg {
  const targets = String(v['targets'] ?? 'http,nats,serve,dist')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const t of targets) {
    if (!TARGETS.includes(t)) {
      throw new CliError(`--targets: unknown target "${t}" (use ${TARGETS.join(', ')})`)
    }
  }
  const m = String(v['model'] ?? 'identity')
  if (m !== 'identity' && m !== 'heavy') {
    throw new CliError(`--model must be identity or heavy, got "${m}"`)
  }
  return {
    targets,
    seconds: intFlag('seconds', v['seconds']) ?? 3,
    connections: intFlag('connections', v['connections']) ?? 64,
    model: m,
    binary: Boolean(v['binary']),
    bulk: intFlag('rows', v['rows']) ?? 1,
    bulkItems: intFlag('bulk-items', v['bulk-items']) ?? 16,
    profile: Boolean(v['profile']),
    out: v['out'] as string | undefined,
    base: v['base'] as string | undefined,
    repeat: intFlag('repeat', v['repeat']) ?? 1,
  }
}

/** A process whose CPU time is measured. */
interface Meter {
  name: string
  /** Its pids (a group of processes, such as Triton's Python backend stubs, sums their CPU). */
  pids: () => number[]
}

const meter = (p: Proc, name = p.name): Meter => ({ name, pids: () => [pidOf(p.proc)] })

function cpuOf(m: Meter): number {
  let t = 0
  for (const pid of m.pids()) {
    try {
      t += cpuMicros(pid)
    } catch {
      // exited
    }
  }
  return t
}

/** Run the load on `url` and read every process's CPU time and NATS's counters around it. */
async function measureHttp(target: string, url: string, procs: Meter[], c: Cfg, b: Bodies, natsVarz: string | undefined, items = 1): Promise<TaxTarget> {
  // Bulk: about as many items in flight as single requests elsewhere (--connections).
  const conns = Math.max(2, Math.round(c.connections / items))
  await runWrk(url, b.script, conns, 1) // warm-up
  const cpu0 = procs.map(cpuOf)
  const v0 = natsVarz ? await varz(natsVarz) : undefined
  const sat = await runWrk(url, b.script, conns, c.seconds)
  const cpu1 = procs.map(cpuOf)
  const v1 = natsVarz ? await varz(natsVarz) : undefined
  if (sat.non2xx > 0 || sat.requests === 0) {
    throw new Error(`${target}: ${sat.non2xx} of ${sat.requests} responses were not 2xx`)
  }
  // Bulk: every figure per item.
  const n = sat.requests * items
  const lat = await runWrk(url, b.script1, 1, 2)
  const per = perRequest(procs, cpu0, cpu1, n)
  return {
    target,
    requestsPerSec: sat.requestsPerSec * items,
    items: items > 1 ? items : c.bulk,
    ...(items > 1 ? { perItem: true } : {}),
    procs: per,
    totalUsPerRequest: per.reduce((a, p) => a + p.usPerRequest, 0),
    natsInPerRequest: v0 && v1 ? (v1.in - v0.in) / n : Number.NaN,
    natsOutPerRequest: v0 && v1 ? (v1.out - v0.out) / n : Number.NaN,
    p50Ms: lat.p50Ms,
  }
}

/** Node flags of the Cohort processes (profiling). */
function nodeFlags(c: Cfg, dir: string, target: string): string[] {
  return c.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, `profile-${target}`)}`] : []
}

/**
 * A load generator process (`cohort-bench tax-nats-requester` or `tax-grpc-load`: warm-up, `ready`,
 * go on a stdin line, one JSON result line), with the CPU of `measured` and NATS's counters around it.
 */
async function runLoadProc(name: string, args: string[], seconds: number, measured: Meter[], natsVarz: string | undefined) {
  const req = start(name, process.execPath, [BENCH_BIN, ...args], true)
  try {
    await req.waitFor(/ready/)
    const all = [...measured, meter(req)]
    const cpu0 = all.map(cpuOf)
    const v0 = natsVarz ? await varz(natsVarz) : undefined
    req.proc.stdin?.write('go\n')
    const line = matched(await req.waitFor(/(\{"requests".*\})/, (seconds + 30) * 1000))
    const cpu1 = all.map(cpuOf)
    const v1 = natsVarz ? await varz(natsVarz) : undefined
    const r = JSON.parse(line) as { requests: number; seconds: number; p50Ms: number }
    const per = perRequest(all, cpu0, cpu1, r.requests)
    return { r, per, v0, v1 }
  } finally {
    await req.stop()
  }
}

/** Triton's processes under PyTriton: the Python process, tritonserver, and the Python backend stubs. */
function tritonMeters(root: number): Meter[] {
  const tree = (): { pid: number; comm: string }[] => {
    const all: { pid: number; ppid: number; comm: string }[] = []
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue
      try {
        const st = readFileSync(`/proc/${d}/stat`, 'utf8')
        const comm = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'))
        const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1])
        all.push({ pid: Number(d), ppid, comm })
      } catch {
        // gone
      }
    }
    const out: { pid: number; comm: string }[] = []
    const walk = (pid: number) => {
      for (const p of all.filter((x) => x.ppid === pid)) {
        out.push(p)
        walk(p.pid)
      }
    }
    walk(root)
    return out
  }
  const group = (re: RegExp) => () =>
    tree()
      .filter((p) => re.test(p.comm))
      .map((p) => p.pid)
  return [
    { name: 'tritonserver', pids: group(/^tritonserver$/) },
    { name: 'Python backend stub', pids: group(/^triton_python/) },
    {
      name: 'Python (PyTriton)',
      pids: () => [
        root,
        ...tree()
          .filter((p) => /^python/.test(p.comm))
          .map((p) => p.pid),
      ],
    },
  ]
}

const PEERS_PY = fileURLToPath(new URL('../../test/peers/.venv/bin/python', import.meta.url))
const TRITON_IDENTITY = fileURLToPath(new URL('../../test/peers/servers/pytriton_identity.py', import.meta.url))

/** Why the triton target cannot run here, or undefined when it can. */
export function tritonUnavailable(): string | undefined {
  if (!existsSync(PEERS_PY)) {
    return `no peers venv at test/peers/.venv (bash test/peers/setup.sh creates it; see test/peers/README.md)`
  }
  try {
    execFileSync(PEERS_PY, ['-c', 'import pytriton.triton'], { stdio: 'ignore', timeout: 60_000 })
  } catch {
    return 'test/peers/.venv has no importable pytriton (bash test/peers/setup.sh)'
  }
  return undefined
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net')
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0))
    })
  })
}

/** Start nats-server, a worker and a gateway (with `gwArgs`); returns the gateway's URL and meters. */
async function startDist(c: Cfg, dir: string, t: string, tag: string, bin: string, models: string[], gwArgs: string[], procs: Proc[]) {
  const nats = await startNats(dir)
  procs.push(nats.p)
  const worker = start('worker', process.execPath, [...nodeFlags(c, dir, t + tag), ...cohortArgs(bin), 'worker', '--nats', nats.url, ...models])
  procs.push(worker)
  await worker.waitFor(/worker \S+ serving/)
  const gw = start('gateway', process.execPath, [...nodeFlags(c, dir, t + tag), ...cohortArgs(bin), 'gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', ...gwArgs])
  procs.push(gw)
  const base = matched(await gw.waitFor(/gateway on (http:\/\/\S+) ->/))
  await waitReady(`${base}/v2/models/m`)
  let gateways: Meter[] = [meter(gw)]
  const kids = gwArgs.includes('--processes')
    ? matched(await gw.waitFor(/gateway processes listening \(pids ([\d, ]+)\)/))
        .split(', ')
        .map(Number)
    : []
  if (kids.length > 0) {
    gateways = [meter(gw, 'gateway primary'), ...kids.map((pid, i) => ({ name: `gateway ${i + 1}`, pids: () => [pid] }))]
  }
  // Order the columns as the path: gateway(s), nats-server, worker.
  return { nats, gw, base, meters: [...gateways, meter(nats.p), meter(worker)] }
}

async function runTarget(t: string, c: Cfg, dir: string, m: { path: string; input: string; features: number }, bin = COHORT_BIN, tag = ''): Promise<TaxTarget | undefined> {
  const procs: Proc[] = []
  try {
    if (t === 'http') {
      const s = start('node:http', process.execPath, [BENCH_BIN, 'tax-http-floor'])
      procs.push(s)
      const port = (await s.waitFor(/listening on (\d+)/))[1]
      const b = bodies(dir, 'http', m.input, m.features, c.bulk, false)
      return await measureHttp('bare node:http', `http://127.0.0.1:${port}/`, [meter(s)], c, b, undefined)
    }
    if (t === 'nats') {
      return await natsTarget(c, dir, procs)
    }
    if (t === 'triton') {
      const why = tritonUnavailable()
      if (why) {
        console.error(`bench tax: triton skipped: ${why}`)
        skipped.set('triton', why)
        return undefined
      }
      const port = await freePort()
      const py = start('PyTriton', PEERS_PY, [TRITON_IDENTITY], false, { PEER_PORT: String(port), PEER_FEATURES: String(m.features) })
      procs.push(py)
      await py.waitFor(/pytriton ready/, 180_000)
      const b = bodies(dir, 'triton', 'in', m.features, c.bulk, c.binary)
      return await measureHttp('Triton (PyTriton, identity function)', `http://127.0.0.1:${port}/v2/models/m/infer`, tritonMeters(pidOf(py.proc)), c, b, undefined)
    }
    // The server-side SLO off the derived default (1 s at least): on a loaded machine it would refuse
    // requests queued past it, and the bench measures the path, not admission's refusals.
    const models = ['--model', `m=${m.path}`, '--threads', '1', '--slo-ms', '30000']
    if (t === 'serve') {
      const b = bodies(dir, t, m.input, m.features, c.bulk, c.binary)
      const s = start('cohort serve', process.execPath, [...nodeFlags(c, dir, t + tag), ...cohortArgs(bin), 'serve', '--port', '0', ...models])
      procs.push(s)
      const base = matched(await s.waitFor(/serving .* on (http:\/\/\S+) \(embedded\)/))
      await waitReady(`${base}/v2/models/m`)
      return await measureHttp(`cohort serve${tag}`, `${base}/v2/models/m/infer`, [meter(s)], c, b, undefined)
    }
    if (t === 'grpc') {
      return await grpcTarget(c, dir, m, bin, tag, models, procs)
    }
    if (t === 'bulk') {
      const d = await startDist(c, dir, t, tag, bin, models, [], procs)
      const b = bulkBodies(dir, m.input, m.features, c.bulkItems)
      return await measureHttp(`bulk ${c.bulkItems}: gateway + nats-server + worker${tag}`, `${d.base}/models/m/predictions/bulk`, d.meters, c, b, d.nats.varz, c.bulkItems)
    }
    const b = bodies(dir, t, m.input, m.features, c.bulk, c.binary)
    const d = await startDist(c, dir, t, tag, bin, models, t === 'dist2' ? ['--processes', '2'] : [], procs)
    return await measureHttp(`${t === 'dist2' ? 'gateway --processes 2' : 'gateway'} + nats-server + worker${tag}`, `${d.base}/v2/models/m/infer`, d.meters, c, b, d.nats.varz)
  } finally {
    await stopAll(procs)
  }
}

/** nats.js request-reply alone: a responder process and a requester process (`procs`: stopped by the caller). */
async function natsTarget(c: Cfg, dir: string, procs: Proc[]): Promise<TaxTarget> {
  const nats = await startNats(dir)
  procs.push(nats.p)
  const resp = start('responder', process.execPath, [BENCH_BIN, 'tax-nats-responder', nats.url])
  procs.push(resp)
  await resp.waitFor(/responding/)
  const run = (inflight: number, seconds: number) =>
    runLoadProc('requester', ['tax-nats-requester', nats.url, String(inflight), String(seconds), '300'], seconds, [meter(nats.p), meter(resp)], nats.varz)
  const sat = await run(c.connections, c.seconds)
  const one = await run(1, 2)
  const n = sat.r.requests
  return {
    target: 'nats.js request-reply',
    requestsPerSec: n / sat.r.seconds,
    items: 1,
    procs: sat.per,
    totalUsPerRequest: sat.per.reduce((a, p) => a + p.usPerRequest, 0),
    natsInPerRequest: sat.v0 && sat.v1 ? (sat.v1.in - sat.v0.in) / n : Number.NaN,
    natsOutPerRequest: sat.v0 && sat.v1 ? (sat.v1.out - sat.v0.out) / n : Number.NaN,
    p50Ms: one.r.p50Ms,
  }
}

/** gRPC: gateway + nats-server + worker under the gRPC load process (`procs`: stopped by the caller). */
async function grpcTarget(c: Cfg, dir: string, m: { input: string; features: number }, bin: string, tag: string, models: string[], procs: Proc[]): Promise<TaxTarget> {
  const t = 'grpc'
  const d = await startDist(c, dir, t, tag, bin, models, ['--grpc-port', '0'], procs)
  const addr = matched(await d.gw.waitFor(/grpc on (\S+:\d+)/))
  const args = (inflight: number, seconds: number) => [
    'tax-grpc-load',
    addr,
    'm',
    m.input,
    String(m.features),
    String(c.bulk),
    c.binary ? '1' : '0',
    String(inflight),
    String(seconds),
  ]
  const sat = await runLoadProc('grpc load', args(c.connections, c.seconds), c.seconds, d.meters, d.nats.varz)
  const one = await runLoadProc('grpc load', args(1, 2), 2, d.meters, undefined)
  const n = sat.r.requests
  const per = sat.per.slice(0, -1) // the load generator is left out, as wrk is
  return {
    target: `gRPC: gateway + nats-server + worker${tag}`,
    requestsPerSec: n / sat.r.seconds,
    items: c.bulk,
    procs: per,
    totalUsPerRequest: per.reduce((a, p) => a + p.usPerRequest, 0),
    natsInPerRequest: sat.v0 && sat.v1 ? (sat.v1.in - sat.v0.in) / n : Number.NaN,
    natsOutPerRequest: sat.v0 && sat.v1 ? (sat.v1.out - sat.v0.out) / n : Number.NaN,
    p50Ms: one.r.p50Ms,
  }
}

/** Targets skipped in this run, with why (printed under the table). */
const skipped = new Map<string, string>()

/** Bulk bodies: `inputs` of `items` Cog-style inputs, one row of `features` each. */
function bulkBodies(dir: string, input: string, features: number, items: number): Bodies {
  const r = mulberry32(7)
  const one = () => ({ [input]: Array.from({ length: features }, () => Math.fround(r() * 2 - 1)) })
  return {
    script: writeWrkScript(dir, 'bulk-n', JSON.stringify({ inputs: Array.from({ length: items }, one) })),
    script1: writeWrkScript(dir, 'bulk-1', JSON.stringify({ inputs: Array.from({ length: items }, one) })),
  }
}

function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  if (s.length === 0) {
    return Number.NaN
  }
  const h = Math.floor(s.length / 2)
  const hi = s[h] ?? Number.NaN
  return s.length % 2 ? hi : ((s[h - 1] ?? Number.NaN) + hi) / 2
}

/** Per target, the median of each number over the rounds (the first round's order). */
export function medians(runs: TaxTarget[][]): TaxTarget[] {
  const first = runs[0] ?? []
  return first.map((r) => {
    const same = runs.map((round) => round.find((x) => x.target === r.target)).filter((x): x is TaxTarget => x !== undefined)
    const med = (f: (x: TaxTarget) => number) => median(same.map(f))
    return {
      target: r.target,
      items: r.items,
      ...(r.perItem ? { perItem: true } : {}),
      requestsPerSec: med((x) => x.requestsPerSec),
      procs: r.procs.map((p) => ({ name: p.name, usPerRequest: med((x) => x.procs.find((q) => q.name === p.name)?.usPerRequest ?? Number.NaN) })),
      totalUsPerRequest: med((x) => x.totalUsPerRequest),
      natsInPerRequest: med((x) => x.natsInPerRequest),
      natsOutPerRequest: med((x) => x.natsOutPerRequest),
      p50Ms: med((x) => x.p50Ms),
    }
  })
}

function fmt(n: number, d = 0): string {
  return Number.isFinite(n) ? n.toFixed(d) : '-'
}

/** The report: one row per target, then the ratios the issue's targets name. */
export function formatTax(rs: TaxTarget[], meta: string): string {
  const lines = [
    meta,
    '',
    '| path | req/s | CPU µs per request (per process) | total µs | NATS msgs in/out per request | p50 c=1 (ms) |',
    '| --- | ---: | --- | ---: | ---: | ---: |',
  ]
  for (const r of rs) {
    const per = r.procs.map((p) => `${p.name} ${fmt(p.usPerRequest)}`).join(' + ')
    const nats = Number.isFinite(r.natsInPerRequest) ? `${fmt(r.natsInPerRequest, 2)} / ${fmt(r.natsOutPerRequest, 2)}` : '-'
    lines.push(`| ${r.target}${r.perItem ? ' (per item)' : ''} | ${fmt(r.requestsPerSec)} | ${per} | ${fmt(r.totalUsPerRequest)} | ${nats} | ${fmt(r.p50Ms, 3)} |`)
  }
  const by = (s: string, base = false) => rs.find((r) => r.target.startsWith(s) && r.target.endsWith('(base)') === base)
  const http = by('bare')
  const nats = by('nats.js')
  const serve = by('cohort serve')
  const dist = by('gateway + ')
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? fmt(a / b, 2) : '-')
  const srv = (r: TaxTarget | undefined) => r?.procs.find((p) => p.name === 'nats-server')?.usPerRequest
  lines.push('')
  lines.push(
    `ratios: serve/http ${ratio(serve?.totalUsPerRequest, http?.totalUsPerRequest)} (target <= 1.5), ` +
      `dist/serve ${ratio(dist?.totalUsPerRequest, serve?.totalUsPerRequest)} (target <= 1.5), ` +
      `dist nats-server/nats.js nats-server ${ratio(srv(dist), srv(nats))} (target <= 2), ` +
      `dist published per request ${fmt(dist?.natsInPerRequest ?? Number.NaN, 2)} (target < 1)`,
  )
  if (dist && http && nats) {
    lines.push(`p50 c=1: dist ${fmt(dist.p50Ms, 3)} ms vs http + nats.js + 0.2 = ${fmt(http.p50Ms + nats.p50Ms + 0.2, 3)} ms`)
  }
  /** CPU per request of the gateway process(es): the primary and every child under --processes. */
  const gwCpu = (r: TaxTarget | undefined) => (r ? r.procs.filter((p) => p.name.startsWith('gateway')).reduce((a, p) => a + p.usPerRequest, 0) : undefined)
  const dist2 = by('gateway --processes')
  if (dist && dist2) {
    lines.push(`--processes 2 / 1: total ${ratio(dist2.totalUsPerRequest, dist.totalUsPerRequest)} (target <= 1.1), gateway processes ${ratio(gwCpu(dist2), gwCpu(dist))}`)
  }
  const grpc = by('gRPC')
  if (dist && grpc) {
    lines.push(`gRPC / HTTP (dist): total ${ratio(grpc.totalUsPerRequest, dist.totalUsPerRequest)}, gateway ${ratio(gwCpu(grpc), gwCpu(dist))}`)
  }
  const bulk = by('bulk')
  if (dist && bulk) {
    lines.push(
      `bulk per item / one request (dist): total ${ratio(bulk.totalUsPerRequest, dist.totalUsPerRequest)}, gateway ${ratio(gwCpu(bulk), gwCpu(dist))}, worker ${ratio(bulk.procs.find((p) => p.name === 'worker')?.usPerRequest, dist.procs.find((p) => p.name === 'worker')?.usPerRequest)}`,
    )
  }
  const triton = by('Triton')
  if (triton) {
    const front = triton.procs.find((p) => p.name === 'tritonserver')?.usPerRequest
    lines.push(
      `against Triton: dist/Triton total ${ratio(dist?.totalUsPerRequest, triton.totalUsPerRequest)} (target <= 1), serve/Triton total ${ratio(serve?.totalUsPerRequest, triton.totalUsPerRequest)}, ` +
        `gateway/tritonserver ${ratio(gwCpu(dist), front)} (stretch <= 1)`,
    )
  }
  for (const [name, prefix] of [
    ['dist', 'gateway + '],
    ['bulk', 'bulk'],
    ['serve', 'cohort serve'],
  ] as const) {
    const now = by(prefix)
    const was = by(prefix, true)
    if (now && was) {
      lines.push(`${name} / ${name} (base): total ${ratio(now.totalUsPerRequest, was.totalUsPerRequest)}${name === 'serve' ? '' : `, gateway ${ratio(gwCpu(now), gwCpu(was))}`}`)
    }
  }
  return lines.join('\n')
}

/** `cohort bench tax`. */
export const benchTaxCommand = defineBenchCommand({
  help: TAX_HELP,
  options: TAX_OPTIONS,
  run: async (v, _positionals, { track, writeJson }) => {
    const c = config(v)
    if (!hasWrk()) {
      throw new CliError('cohort bench tax needs wrk (apt-get install -y wrk)')
    }
    const dir = mkdtempSync(join(tmpdir(), 'cohort-tax-'))
    track(() => {
      if (!c.profile) {
        rmSync(dir, { recursive: true, force: true })
      } else {
        console.error(`bench tax: profiles kept in ${dir}`)
      }
      return Promise.resolve()
    })
    track(() => stopAll([...live]))
    const load0 = loadavg()[0] ?? Number.NaN
    const m = c.model === 'heavy' ? { path: ensureHeavyModel(), input: 'input', features: 512 } : { path: identityModel(dir, 64), input: 'in', features: 64 }
    const runs: TaxTarget[][] = []
    for (let k = 0; k < c.repeat; k++) {
      const round: TaxTarget[] = []
      for (const t of c.targets) {
        console.error(`bench tax: ${t} (round ${k + 1} of ${c.repeat})...`)
        // Before/after alternate in which goes first, so neither always runs on the warmer machine.
        const baseDir = c.base
        const base = baseDir && BASE_TARGETS.has(t) ? () => runTarget(t, c, dir, m, join(baseDir, 'apps/cli/bin/cohort.js'), ' (base)') : undefined
        const got: (TaxTarget | undefined)[] = []
        if (base && k % 2 === 1) {
          const b = await base()
          got.push(await runTarget(t, c, dir, m), b)
        } else {
          got.push(await runTarget(t, c, dir, m))
          if (base) {
            got.push(await base())
          }
        }
        round.push(...got.filter((x): x is TaxTarget => x !== undefined))
      }
      runs.push(round)
    }
    const results = medians(runs)
    const meta = `cohort bench tax: ${c.model === 'identity' ? 'Identity on 64 FP32' : 'heavy MLP 512->2560x3->16'}, ${c.binary ? 'binary tensors' : 'OIP JSON'}, ${c.bulk} row(s) per request, wrk -t1 -c${c.connections} ${c.seconds} s per target, median of ${c.repeat} round(s); commit ${gitCommit()}; load ${load0.toFixed(2)} -> ${(loadavg()[0] ?? 0).toFixed(2)}`
    console.log(formatTax(results, meta))
    for (const [t, why] of skipped) {
      console.log(`${t}: skipped: ${why}`)
    }
    if (c.profile) {
      for (const t of c.targets.filter((x) => COHORT_TARGETS.has(x))) {
        for (const tag of c.base && BASE_TARGETS.has(t) ? ['', ' (base)'] : ['']) {
          const pdir = join(dir, `profile-${t}${tag}`)
          printProfiles(`CPU profile of ${t}${tag}:`, summariseProfiles(pdir, 25))
          console.log(`\nWhere the time goes, ${t}${tag} (main threads; idle and module loading left out):`)
          for (const f of readdirSync(pdir).filter((x) => x.endsWith('.cpuprofile'))) {
            const cp = categoriseProfile(join(pdir, f))
            if (cp.busyMs < 200) {
              continue // an ORT or loader thread
            }
            console.log(`  ${f} (${cp.busyMs.toFixed(0)} ms busy)`)
            for (const r of cp.rows) {
              console.log(`    ${(100 * r.share).toFixed(1).padStart(5)}%  ${r.category}`)
            }
          }
        }
      }
    }
    if (c.out) {
      writeJson(c.out, { config: c, results, runs }, false)
    }
  },
})
