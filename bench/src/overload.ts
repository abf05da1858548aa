import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeValue, subjects } from '@cohort/protocol'
import { COHORT_BIN } from '@cohort/test-support'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureDemoModel, ensureHeavyModel } from '@cohort/cli/demo-model'
import { demoBody } from './bodies.ts'
import { LoadGenerator } from './load-worker.ts'
import {
  overloadTargets,
  stepTable,
  summariseOverloadStep,
  targetTable,
  type CpuShare,
  type MeasuredStep,
  type ModelOverload,
  type StepSpec,
} from './overload-stats.ts'
import type { LoadStep } from './poisson.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { metricTotals, type MetricTotals } from './step-stats.ts'
import { cpuMicros, start, startNats, stopAll, type Proc } from './tax.ts'
import { hasWrk, runWrk, writeWrkScript, type SaturationResult } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchValues } from './skeleton.ts'

/** Help of `cohort bench overload`. */
export const OVERLOAD_HELP = `cohort bench overload [options]
Issue 14's overload targets in one run (docs/benchmarks.md#overload): per model, nats-server +
cohort worker (--threads 1) + cohort gateway (two API keys), each its own process; capacity =
closed-loop wrk -c128; open-loop Poisson steps at 1.5x, 2x, 4x capacity and a 10x burst, each with
a client deadline (x-cohort-timeout-ms) and with none (the server-side SLO); a two-tenant flood
(one key at 3x, the other at 15%); then the targets, met or missed.
  --models LIST        heavy, demo, affine (default heavy,demo,affine): the heavy MLP
                       512->2560x3->16, the demo MLP 256->1024->1024->10, the sleep-based affine
                       predictor (test/fixtures/affine-predictor.ts, t(b) = 5 + 0.5 b ms)
  --step-s S           seconds per overload step (default 3)
  --burst-s S          seconds of the 10x burst (default 0.5)
  --tenant-s S         seconds of the two-tenant flood (default 4)
  --deadline-ms MS     client deadline of the "with deadline" steps (default 250)
  --tenant-deadline-ms MS  client deadline of both tenants (default 500)
  --connections N      wrk connections of the capacity run (default 128)
  --capacity-s S       seconds of each of the 3 capacity runs, whose median is the capacity (default 2)
  --capacity-warm-s S  wrk warm-up before them (default 8: the self-tuned batch cap and the JIT settle)
  --max-sockets N      connection cap of each open-loop generator (default 1024)
  --out FILE           also write the results as JSON`

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const AFFINE_FIXTURE = join(ROOT, 'test/fixtures/affine-predictor.ts')
/** The two API keys of the gateway: tenant `key:0` (everything but the quiet tenant) and `key:1`. */
const KEYS = ['cohort-bench-tenant-a', 'cohort-bench-tenant-b'] as const

/** A model as this benchmark serves it. */
interface OverloadModel {
  name: string
  describe: string
  workerArgs: string[]
  path: string
  body: string
  sleepBased: boolean
  modelBound: boolean
}

function overloadModel(name: string): OverloadModel {
  if (name === 'heavy') {
    return {
      name,
      describe: 'heavy MLP 512->2560x3->16, 1 ORT thread',
      workerArgs: ['--model', `heavy=${ensureHeavyModel()}`, '--threads', '1'],
      path: '/v2/models/heavy/infer',
      body: demoBody(512),
      sleepBased: false,
      modelBound: true,
    }
  }
  if (name === 'demo') {
    return {
      name,
      describe: 'demo MLP 256->1024->1024->10, 1 ORT thread',
      workerArgs: ['--model', `demo=${ensureDemoModel()}`, '--threads', '1'],
      path: '/v2/models/demo/infer',
      body: demoBody(256),
      sleepBased: false,
      modelBound: false,
    }
  }
  if (name === 'affine') {
    return {
      name,
      describe: 'affine predictor, sleeps 5 + 0.5 b ms per batch of b (max batch 32)',
      workerArgs: ['--predictor', AFFINE_FIXTURE],
      path: '/models/affine/predictions',
      body: JSON.stringify({ input: { x: 1 } }),
      sleepBased: true,
      modelBound: false,
    }
  }
  throw new CliError(`--models: unknown model "${name}" (use heavy, demo, affine)`)
}

const OVERLOAD_OPTIONS = {
  models: { type: 'string' },
  'step-s': { type: 'string' },
  'burst-s': { type: 'string' },
  'tenant-s': { type: 'string' },
  'deadline-ms': { type: 'string' },
  'tenant-deadline-ms': { type: 'string' },
  connections: { type: 'string' },
  'capacity-s': { type: 'string' },
  'capacity-warm-s': { type: 'string' },
  'max-sockets': { type: 'string' },
  out: { type: 'string' },
} satisfies BenchCommand['options']

function options(v: BenchValues) {
  const models = String(v['models'] ?? 'heavy,demo,affine').split(',').map((s) => s.trim()).filter(Boolean)
  return {
    models: models.map(overloadModel),
    stepS: numFlag('step-s', v['step-s']) ?? 3,
    burstS: numFlag('burst-s', v['burst-s']) ?? 0.5,
    tenantS: numFlag('tenant-s', v['tenant-s']) ?? 4,
    deadlineMs: numFlag('deadline-ms', v['deadline-ms']) ?? 250,
    tenantDeadlineMs: numFlag('tenant-deadline-ms', v['tenant-deadline-ms']) ?? 500,
    connections: intFlag('connections', v['connections']) ?? 128,
    capacityS: intFlag('capacity-s', v['capacity-s']) ?? 2,
    capacityWarmS: intFlag('capacity-warm-s', v['capacity-warm-s']) ?? 8,
    maxSockets: intFlag('max-sockets', v['max-sockets']) ?? 1024,
    out: v['out'] as string | undefined,
  }
}

type Options = ReturnType<typeof options>

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Stable per-label seed: the same label gets the same arrival pattern in every run. */
function seedOf(label: string): number {
  let h = 2166136261
  for (const ch of label) {
    h = Math.imul(h ^ ch.charCodeAt(0), 16777619)
  }
  return h >>> 0
}

/** The server-side SLO the model's workers announce in their metadata (ms; NaN: none). */
async function serverSlo(nc: NatsConnection, model: string): Promise<number> {
  try {
    const m = await nc.request(subjects().meta(model), new Uint8Array(0), { timeout: 2000 })
    const slo = (decodeValue(m.data) as { slo?: { ms?: number } }).slo?.ms
    return typeof slo === 'number' && slo > 0 ? slo : Number.NaN
  } catch {
    return Number.NaN
  }
}

async function waitReady(url: string, key: string): Promise<void> {
  const until = Date.now() + 60_000
  let last = ''
  while (Date.now() < until) {
    try {
      const r = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
      last = `HTTP ${r.status} ${await r.text()}`
      if (r.ok) {
        return
      }
    } catch (e) {
      last = String(e)
    }
    await sleep(200)
  }
  throw new Error(`${url} did not become ready: ${last}`)
}

/**
 * CPU time of each process (every thread, /proc/PID/stat) and the time its main thread (the
 * event loop) waited on a run queue for a core (/proc/PID/schedstat), between two readings, per
 * second of wall time.
 */
function cpuMeter(procs: Record<string, number | undefined>): () => { cpu: CpuShare; runqueueWait: CpuShare } {
  const read = () => Object.fromEntries(Object.entries(procs).map(([n, pid]) => [n, pid === undefined ? [Number.NaN, Number.NaN] : [safeCpu(pid), runqueueWaitNs(pid)]]))
  const c0 = read()
  const t0 = performance.now()
  return () => {
    const c1 = read()
    const s = (performance.now() - t0) / 1000
    const d = (n: string, i: 0 | 1, scale: number) => ((c1[n]![i]! - c0[n]![i]!) / scale) / s
    return {
      cpu: Object.fromEntries(Object.keys(procs).map((n) => [n, d(n, 0, 1e6)])),
      runqueueWait: Object.fromEntries(Object.keys(procs).map((n) => [n, d(n, 1, 1e9)])),
    }
  }
}

function safeCpu(pid: number): number {
  try {
    return cpuMicros(pid)
  } catch {
    return Number.NaN
  }
}

/** ns the main thread of `pid` has waited on a run queue (second field of /proc/PID/schedstat); NaN where unreadable. */
function runqueueWaitNs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1])
  } catch {
    return Number.NaN
  }
}

function gatewayMean(a: MetricTotals, b: MetricTotals): number {
  const n = b.requestCount - a.requestCount
  return n > 0 ? ((b.requestSum - a.requestSum) * 1000) / n : Number.NaN
}

/**
 * Wait until the gateway's request count (`cohort_request_duration_seconds_count`) stops moving
 * for two polls 200 ms apart (at most 10 s), so a step's backlog (requests still in the
 * gateway's socket buffers after the generator let go) does not spill into the next step.
 */
async function settle(metricsUrl: string, model: string, log: (s: string) => void): Promise<void> {
  const until = performance.now() + 10_000
  let last = Number.NaN
  let still = 0
  while (still < 2 && performance.now() < until) {
    await sleep(200)
    const n = await metricTotals(metricsUrl, model).then((t) => t.requestCount, () => Number.NaN)
    still = n === last ? still + 1 : 0
    last = n
  }
  if (still < 2) {
    log('the gateway was still answering the last step after 10 s; the next step starts anyway')
  }
}

/** Start nats-server, the worker and the gateway of one model; measure it; stop them. */
async function runModel(m: OverloadModel, o: Options, dir: string, gens: [LoadGenerator, LoadGenerator], procs: Proc[], log: (s: string) => void): Promise<ModelOverload> {
  const result: ModelOverload = {
    model: m.name,
    describe: m.describe,
    capacity: Number.NaN,
    capacityRuns: [],
    capacityAfter: Number.NaN,
    capacityNon2xx: 0,
    capacitySocketErrors: 0,
    capacityP99Ms: Number.NaN,
    sleepBased: m.sleepBased,
    modelBound: m.modelBound,
    steps: [],
    tenants: undefined,
    errors: [],
  }
  let nc: NatsConnection | undefined
  try {
    log(`[${m.name}] starting nats-server + worker + gateway`)
    const nats = await startNats(dir)
    procs.push(nats.p)
    const worker = start('worker', process.execPath, [COHORT_BIN, 'worker', '--nats', nats.url, ...m.workerArgs])
    procs.push(worker)
    await worker.waitFor(/worker \S+ serving/, 120_000)
    const keys = KEYS.flatMap((k) => ['--api-key', k])
    const gw = start('gateway', process.execPath, [COHORT_BIN, 'gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--metrics-open', ...keys])
    procs.push(gw)
    const base = (await gw.waitFor(/gateway on (http:\/\/\S+) ->/, 120_000))[1]!
    await waitReady(`${base}/v2/models/${m.name}`, KEYS[0])
    nc = await connect({ servers: nats.url })
    const url = base + m.path
    const gwMetrics = `${base}/metrics`
    const pids = { gateway: gw.proc.pid, worker: worker.proc.pid, nats: nats.p.proc.pid, gen: gens[0].pid }

    // Capacity: closed loop, the same layout and key.
    const script = writeWrkScript(dir, `${m.name}-a`, m.body, { Authorization: `Bearer ${KEYS[0]}` })
    log(`[${m.name}] capacity: wrk -c${o.connections}, ${o.capacityWarmS} s warm-up, then the median of 3 x ${o.capacityS} s`)
    await runWrk(url, script, o.connections, o.capacityWarmS, { allowNon2xx: true, timeoutS: 10 })
    const caps: SaturationResult[] = []
    for (let i = 0; i < 3; i++) {
      caps.push(await runWrk(url, script, o.connections, o.capacityS, { allowNon2xx: true, timeoutS: 10 }))
    }
    const rate = (r: SaturationResult) => (r.requests - r.non2xx) / r.seconds
    const cap = [...caps].sort((a, b) => rate(a) - rate(b))[1]!
    result.capacityRuns = caps.map(rate)
    result.capacity = rate(cap)
    result.capacityNon2xx = cap.non2xx
    result.capacitySocketErrors = cap.socketErrors
    result.capacityP99Ms = cap.p99Ms
    const C = result.capacity
    log(`[${m.name}] capacity ${Math.round(C)} req/s (runs ${result.capacityRuns.map(Math.round).join(', ')}; ${cap.non2xx} non-2xx, p99 ${cap.p99Ms.toFixed(1)} ms)`)
    if (!(C > 0)) {
      throw new Error(`capacity run got no 2xx answers (${cap.non2xx} non-2xx)`)
    }

    const loadStep = (label: string, rate: number, durationS: number, key: string, deadline: number | undefined, drainMs: number): LoadStep => ({
      url,
      body: m.body,
      headers: { authorization: `Bearer ${key}`, ...(deadline !== undefined ? { 'x-cohort-timeout-ms': String(deadline) } : {}) },
      rate,
      durationS,
      seed: seedOf(`${m.name} ${label}`),
      maxSockets: o.maxSockets,
      drainMs,
    })
    const runStep = async (label: string, multiple: number, durationS: number, deadline: number | undefined): Promise<MeasuredStep> => {
      const sloMs = await serverSlo(nc!, m.name)
      const budget = deadline ?? sloMs
      const spec: StepSpec = { label, multiple, rate: multiple * C, clientDeadlineMs: deadline, sloMs, capacity: C }
      const meter = cpuMeter(pids)
      const g0 = await metricTotals(gwMetrics, m.name)
      const rec = await gens[0].run(loadStep(label, spec.rate, durationS, KEYS[0], deadline, (Number.isFinite(budget) ? budget : 30_000) + 3000))
      const s = { ...summariseOverloadStep(spec, rec), ...meter(), gatewayMeanMs: gatewayMean(g0, await metricTotals(gwMetrics, m.name)) }
      log(`[${m.name}] ${label} ${deadline !== undefined ? `deadline ${deadline} ms` : `no deadline (SLO ${sloMs} ms)`}: goodput ${s.goodputFraction.toFixed(2)} of capacity, ok p99 ${s.okP99.toFixed(1)} ms, refusal p99 ${s.refusalP99.toFixed(1)} ms, ${JSON.stringify(s.byStatus)}`)
      await sleep(300)
      await settle(gwMetrics, m.name, log)
      return s
    }
    for (const deadline of [o.deadlineMs, undefined]) {
      for (const mult of [1.5, 2, 4]) {
        result.steps.push(await runStep(`${mult}x`, mult, o.stepS, deadline))
      }
      await sleep(700)
      result.steps.push(await runStep('burst 10x', 10, o.burstS, deadline))
    }

    // Two tenants: key 0 floods at 3x, key 1 sends 15 %, at once, from two generator processes.
    const floodM = 3
    const quietM = 0.15
    const sloMs = await serverSlo(nc, m.name)
    const d = o.tenantDeadlineMs
    log(`[${m.name}] two tenants: ${floodM}x and ${quietM * 100}% of capacity, ${d} ms deadlines, ${o.tenantS} s`)
    const meter = cpuMeter({ ...pids, gen2: gens[1].pid })
    const g0 = await metricTotals(gwMetrics, m.name)
    const [fr, qr] = await Promise.all([
      gens[0].run(loadStep('flood', floodM * C, o.tenantS, KEYS[0], d, d + 3000)),
      gens[1].run(loadStep('quiet', quietM * C, o.tenantS, KEYS[1], d, d + 3000)),
    ])
    const cpu = { ...meter(), gatewayMeanMs: gatewayMean(g0, await metricTotals(gwMetrics, m.name)) }
    const spec = (label: string, multiple: number): StepSpec => ({ label, multiple, rate: multiple * C, clientDeadlineMs: d, sloMs, capacity: C })
    result.tenants = {
      flood: { ...summariseOverloadStep(spec(`tenant A ${floodM}x`, floodM), fr), ...cpu },
      quiet: { ...summariseOverloadStep(spec(`tenant B ${quietM * 100}%`, quietM), qr), ...cpu },
    }
    const q = result.tenants.quiet
    log(`[${m.name}] quiet tenant: ${q.goodShare.toFixed(2)} of ${q.sent} within ${d} ms, ${JSON.stringify(q.byStatus)}`)
    await settle(gwMetrics, m.name, log)
    const again = await runWrk(url, script, o.connections, o.capacityS, { allowNon2xx: true, timeoutS: 10 })
    result.capacityAfter = (again.requests - again.non2xx) / again.seconds
    log(`[${m.name}] capacity after the steps ${Math.round(result.capacityAfter)} req/s`)
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0]! : String(e)
    log(`[${m.name}] failed: ${msg}`)
    result.errors.push(msg)
  } finally {
    for (const p of procs) {
      if (p.proc.exitCode !== null || p.proc.signalCode !== null) {
        const msg = `${p.name} exited during the run (${p.proc.signalCode ?? p.proc.exitCode}); its last output: ${p.out().slice(-600)}`
        log(`[${m.name}] ${msg}`)
        result.errors.push(msg)
      }
    }
    await nc?.close().catch(() => undefined)
    await stopAll(procs)
    procs.length = 0
  }
  return result
}

/** Everything one `cohort bench overload` run measured (the `--out` JSON). */
export interface OverloadResult {
  startedAt: string
  commit: string
  command: string
  wallS: number
  machine: ReturnType<typeof machineInfo> & { procLoadavg: [string, string] }
  options: Omit<Options, 'models' | 'out'>
  models: ModelOverload[]
}

const loadavgText = () => {
  try {
    return readFileSync('/proc/loadavg', 'utf8').trim()
  } catch {
    return 'n/a'
  }
}

/** Render the report: run info, per model its capacity and step table, then the targets. */
export function formatOverload(r: OverloadResult): string {
  const out: string[] = []
  out.push(`${r.command} @ ${r.commit}, ${r.startedAt}; ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}; ${(r.wallS / 60).toFixed(1)} min`)
  out.push(`/proc/loadavg at start: ${r.machine.procLoadavg[0]}; at end: ${r.machine.procLoadavg[1]}`)
  out.push(
    `steps ${r.options.stepS} s (burst ${r.options.burstS} s, tenants ${r.options.tenantS} s), open-loop Poisson from separate generator processes (<= ${r.options.maxSockets} sockets each), ` +
      `latency from the scheduled send; client deadline ${r.options.deadlineMs} ms or none (the server SLO); tenants ${r.options.tenantDeadlineMs} ms`,
  )
  for (const m of r.models) {
    out.push(`\n=== ${m.model}: ${m.describe}`)
    out.push(`capacity (wrk -c${r.options.connections}, median of ${m.capacityRuns.map(Math.round).join(', ')} over ${r.options.capacityS} s each): ${Math.round(m.capacity)} 200s/s, p99 ${m.capacityP99Ms.toFixed(1)} ms, ${m.capacityNon2xx} non-2xx, ${m.capacitySocketErrors} socket errors; after every step ${Math.round(m.capacityAfter)} 200s/s`)
    for (const e of m.errors) {
      out.push(`FAILED ${e}`)
    }
    if (m.steps.length > 0) {
      out.push(stepTable(m))
    }
  }
  out.push('\nTargets (issue 14)')
  out.push(targetTable(overloadTargets(r.models)))
  return out.join('\n')
}

/**
 * `cohort bench overload`: issue 14's overload benchmark over NATS. Every child process (NATS,
 * worker, gateway, wrk, the two load generators) is stopped on exit, on errors and on
 * SIGINT/SIGTERM.
 */
export const benchOverloadCommand = defineBenchCommand({
  help: OVERLOAD_HELP,
  options: OVERLOAD_OPTIONS,
  run: async (v, _positionals, { args, track, log, startedAt, t0, load0, writeJson }) => {
    const o = options(v)
    if (!hasWrk()) {
      throw new CliError('cohort bench overload needs wrk for its capacity runs (apt-get install -y wrk)')
    }
    const la0 = loadavgText()
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-overload-'))
    track(async () => rmSync(dir, { recursive: true, force: true }))
    const gens: [LoadGenerator, LoadGenerator] = [LoadGenerator.start(), LoadGenerator.start()]
    track(() => Promise.all(gens.map((g) => g.stop())))
    const procs: Proc[] = []
    track(() => stopAll(procs))
    const models: ModelOverload[] = []
    for (const m of o.models) {
      for (let i = 0; i < gens.length; i++) {
        if (!gens[i]!.running) {
          log('a load generator died; starting a new one')
          gens[i] = LoadGenerator.start()
        }
      }
      models.push(await runModel(m, o, dir, gens, procs, log))
    }
    const { models: _m, out, ...opts } = o
    const result: OverloadResult = {
      startedAt,
      commit: gitCommit(),
      command: `cohort bench overload ${args.join(' ')}`.trim(),
      wallS: (performance.now() - t0) / 1000,
      machine: { ...machineInfo(load0), procLoadavg: [la0, loadavgText()] },
      options: opts,
      models,
    }
    console.log(formatOverload(result))
    if (out) {
      writeJson(out, result)
    }
    if (models.some((x) => x.errors.length > 0)) {
      throw new CliError(`some models failed: ${models.flatMap((x) => x.errors.map((e) => `${x.model}: ${e}`)).join('; ')}`)
    }
  },
})
