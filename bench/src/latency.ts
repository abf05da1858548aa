import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { intFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { COHORT_BIN, cohortArgs } from '@cohort/test-support'
import { BENCH_BIN } from './bin-path.ts'
import { gitCommit } from './run-info.ts'
import { defineBenchCommand, type BenchCommand } from './skeleton.ts'
import { waitReady } from './served.ts'
import { cpuMicros, identityModel, matched, pidOf, start, startNats, stopAll, type Proc } from './tax.ts'
import { hasWrk, runWrk, writeWrkScript } from './wrk.ts'

/** Help of `cohort bench latency`. */
export const LATENCY_HELP = `cohort bench latency [options]
Latency of a lone request (docs/bench/hot-path-2026-12-02.md): wrk -c1 --latency, keep-alive,
p50 and p99 per path in one run, with ratios to the bare node:http floor, and the CPU and context
switches the served processes spend per request (from /proc: a loaded machine's latency is noise,
its CPU far less). Each target is warmed 2 s at 16 connections and 1 s at c=1 first.
  --targets LIST   comma-separated, in the order given (default http,serve,dist,predictions,oip):
                     http         bare node:http floor (the same JSON body read, a small JSON answer)
                     serve        cohort serve (embedded), OIP infer on an ONNX Identity of 64 floats
                     dist         cohort gateway + nats-server + cohort worker, the same request
                     predictions  cohort serve, POST /predictions of a TypeScript predictor (no model named)
                     oip          cohort serve, OIP infer on the same predictor
  --seconds S      seconds per target (default 3)
  --base DIR       also run every Cohort target from the Cohort checkout DIR (before/after, side by side)
  --out FILE       also write the results as JSON`

/** One target's latency at concurrency 1. */
export interface LatencyTarget {
  target: string
  requests: number
  p50Ms: number
  p99Ms: number
  /** CPU µs per request of the served processes (utime + stime over the run, all of them). */
  cpuUsPerRequest: number
  /** Context switches per request of the served processes, every thread (voluntary: a thread went to sleep). */
  ctxPerRequest?: { voluntary: number; involuntary: number }
}

/** Context switches so far of every thread of `pid` (/proc/PID/task/TID/status), 0s once it exited. */
export function ctxSwitches(pid: number): { voluntary: number; involuntary: number } {
  const out = { voluntary: 0, involuntary: 0 }
  let tids: string[] = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return out
  }
  for (const tid of tids) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8')
      out.voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0)
      out.involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0)
    } catch {
      // the thread ended meanwhile
    }
  }
  return out
}

const LATENCY_OPTIONS = {
  targets: { type: 'string' },
  seconds: { type: 'string' },
  base: { type: 'string' },
  out: { type: 'string' },
} satisfies BenchCommand['options']

const TARGETS = ['http', 'serve', 'dist', 'predictions', 'oip']
const FLOOR_PREDICTOR = fileURLToPath(new URL('../../test/fixtures/affine-predictor.ts', import.meta.url))
const FEATURES = 64

/**
 * Warm-up before each measured run: 2 s at 16 connections (enough requests for V8 to optimize the
 * served path: at c=1 alone, 35-45% of a 3 s run was spent before it was compiled), then 1 s at
 * c=1 (the connection and the lone-request code path in the state the run measures).
 */
export const LATENCY_WARMUP: readonly { connections: number; seconds: number }[] = [
  { connections: 16, seconds: 2 },
  { connections: 1, seconds: 1 },
]

/** Run wrk -c1 on `url` with `script` (after {@link LATENCY_WARMUP}), with the CPU of `procs` around the measured run. */
async function measure(target: string, url: string, script: string, procs: Proc[], seconds: number): Promise<LatencyTarget> {
  for (const w of LATENCY_WARMUP) {
    await runWrk(url, script, w.connections, w.seconds, { allowNon2xx: true })
  }
  const cpu = () => procs.reduce((a, p) => a + cpuMicros(pidOf(p.proc)), 0)
  const ctx = () =>
    procs.reduce(
      (a, p) => {
        const c = ctxSwitches(pidOf(p.proc))
        return { voluntary: a.voluntary + c.voluntary, involuntary: a.involuntary + c.involuntary }
      },
      { voluntary: 0, involuntary: 0 },
    )
  const x0 = ctx()
  const c0 = cpu()
  const r = await runWrk(url, script, 1, seconds)
  const c1 = cpu()
  const x1 = ctx()
  if (r.requests === 0) {
    throw new Error(`${target}: no request answered`)
  }
  const ctxPerRequest = { voluntary: (x1.voluntary - x0.voluntary) / r.requests, involuntary: (x1.involuntary - x0.involuntary) / r.requests }
  return { target, requests: r.requests, p50Ms: r.p50Ms, p99Ms: r.p99Ms, cpuUsPerRequest: (c1 - c0) / r.requests, ctxPerRequest }
}

interface Scripts {
  infer: string
  predictions: string
  oip: string
}

async function runTarget(t: string, dir: string, model: string, s: Scripts, seconds: number, bin: string, tag: string): Promise<LatencyTarget> {
  const procs: Proc[] = []
  const modelArgs = ['--model', `m=${model}`, '--threads', '1', '--slo-ms', '30000']
  try {
    if (t === 'http') {
      const p = start('node:http', process.execPath, [BENCH_BIN, 'tax-http-floor'])
      procs.push(p)
      const port = (await p.waitFor(/listening on (\d+)/))[1]
      return await measure('bare node:http', `http://127.0.0.1:${port}/`, s.infer, procs, seconds)
    }
    if (t === 'dist') {
      const nats = await startNats(dir)
      procs.push(nats.p)
      const worker = start('worker', process.execPath, [...cohortArgs(bin), 'worker', '--nats', nats.url, ...modelArgs])
      procs.push(worker)
      await worker.waitFor(/worker \S+ serving/)
      const gw = start('gateway', process.execPath, [...cohortArgs(bin), 'gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0'])
      procs.push(gw)
      const base = matched(await gw.waitFor(/gateway on (http:\/\/\S+) ->/))
      await waitReady(`${base}/v2/models/m`)
      return await measure(`gateway + nats-server + worker${tag}`, `${base}/v2/models/m/infer`, s.infer, procs, seconds)
    }
    const predictor = t === 'predictions' || t === 'oip'
    // The floor predictor alone: POST /predictions names no model, so the gateway picks the one served.
    const args = predictor ? ['--predictor', FLOOR_PREDICTOR] : modelArgs
    const p = start('cohort serve', process.execPath, [...cohortArgs(bin), 'serve', '--port', '0', ...args], false, predictor ? { AFFINE_A_MS: '0', AFFINE_C_MS: '0' } : undefined)
    procs.push(p)
    const base = matched(await p.waitFor(/serving .* on (http:\/\/\S+) \(embedded\)/))
    await waitReady(`${base}/v2/models/${predictor ? 'affine' : 'm'}`)
    if (t === 'predictions') {
      return await measure(`cohort serve, POST /predictions (predictor)${tag}`, `${base}/predictions`, s.predictions, procs, seconds)
    }
    if (t === 'oip') {
      return await measure(`cohort serve, OIP infer (predictor)${tag}`, `${base}/v2/models/affine/infer`, s.oip, procs, seconds)
    }
    return await measure(`cohort serve (embedded ONNX)${tag}`, `${base}/v2/models/m/infer`, s.infer, procs, seconds)
  } finally {
    await stopAll(procs)
  }
}

/** The results as a table with ratios to the floor (and to the base run, with --base). */
export function formatLatency(rs: LatencyTarget[], meta: string): string {
  const floor = rs.find((r) => r.target === 'bare node:http')
  const x = (a: number, b: number | undefined) => (b !== undefined && b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(1)}x` : '-')
  const lines = [
    `cohort bench latency (${meta})`,
    '| path | requests | p50 ms | p99 ms | p50 / floor | CPU µs/request | CPU / floor | ctx switches/request (vol + invol) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const r of rs) {
    const cs = r.ctxPerRequest ? `${r.ctxPerRequest.voluntary.toFixed(2)} + ${r.ctxPerRequest.involuntary.toFixed(2)}` : '-'
    lines.push(
      `| ${r.target} | ${r.requests} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${x(r.p50Ms, floor?.p50Ms)} | ${r.cpuUsPerRequest.toFixed(0)} | ${x(r.cpuUsPerRequest, floor?.cpuUsPerRequest)} | ${cs} |`,
    )
  }
  for (const r of rs.filter((v) => v.target.endsWith(' (base)'))) {
    const now = rs.find((v) => v.target === r.target.slice(0, -' (base)'.length))
    if (now) {
      lines.push(`${now.target} / base: p50 ${x(now.p50Ms, r.p50Ms)}, p99 ${x(now.p99Ms, r.p99Ms)}, CPU ${x(now.cpuUsPerRequest, r.cpuUsPerRequest)}`)
    }
  }
  return lines.join('\n')
}

export const benchLatencyCommand = defineBenchCommand({
  help: LATENCY_HELP,
  options: LATENCY_OPTIONS,
  run: async (v, _positionals, { track, writeJson }) => {
    const targets = String(v['targets'] ?? TARGETS.join(','))
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean)
    for (const t of targets) {
      if (!TARGETS.includes(t)) {
        throw new CliError(`--targets: unknown target "${t}" (use ${TARGETS.join(', ')})`)
      }
    }
    const seconds = intFlag('seconds', v['seconds']) ?? 3
    const baseDir = v['base'] as string | undefined
    if (!hasWrk()) {
      throw new CliError('cohort bench latency needs wrk (apt-get install -y wrk)')
    }
    const dir = mkdtempSync(join(tmpdir(), 'cohort-latency-'))
    track(() => {
      rmSync(dir, { recursive: true, force: true })
      return Promise.resolve()
    })
    const model = identityModel(dir, FEATURES)
    const data = Array.from({ length: FEATURES }, (_, i) => Math.fround(i / 64))
    const scripts: Scripts = {
      infer: writeWrkScript(dir, 'infer', JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, FEATURES], data }] })),
      predictions: writeWrkScript(dir, 'predictions', JSON.stringify({ input: { x: 2 } })),
      oip: writeWrkScript(dir, 'oip', JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [2] }] })),
    }
    const load0 = loadavg()[0] ?? Number.NaN
    const out: LatencyTarget[] = []
    for (const [i, t] of targets.entries()) {
      console.error(`bench latency: ${t}...`)
      const now = () => runTarget(t, dir, model, scripts, seconds, COHORT_BIN, '')
      const base = baseDir && t !== 'http' ? () => runTarget(t, dir, model, scripts, seconds, join(baseDir, 'apps/cli/bin/cohort.js'), ' (base)') : undefined
      // Before and after alternate in which runs first, so neither always gets the warmer machine.
      if (base && i % 2 === 1) {
        const b = await base()
        out.push(await now(), b)
      } else {
        out.push(await now())
        if (base) {
          out.push(await base())
        }
      }
    }
    const meta = `commit ${gitCommit()}${baseDir ? `, base ${baseDir}` : ''}, ${seconds} s per target, load average ${load0.toFixed(2)} -> ${(loadavg()[0] ?? Number.NaN).toFixed(2)}`
    console.log(formatLatency(out, meta))
    const file = v['out'] as string | undefined
    if (file) {
      writeJson(file, { meta, targets: out })
    }
  },
})
