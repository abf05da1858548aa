import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeValue, subjects } from '@cohort/protocol'
import { cohortArgs } from '@cohort/test-support'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureHeavyModel } from '@cohort/cli/demo-model'
import { deepMacs, ensureDeepModel } from './overload-model.ts'
import { demoBody } from './bodies.ts'
import { summariseOverloadStep, type StepSpec } from './overload-stats.ts'
import {
  layoutOutcomeTable,
  layoutStepTable,
  layoutTargets,
  layoutTargetTable,
  type CapacityRun,
  type CpuSeconds,
  type LayoutResult,
  type LayoutStep,
  type Metered,
} from './overload-layout-stats.ts'
import { table } from './report.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { metricTotals } from './step-stats.ts'
import { cpuMicros, identityModel, start, startNats, stopAll, type Proc } from './tax.ts'
import { attack, ensureVegeta, killAttacks, vegetaRecords, writeVegetaTargets, type RunningAttack, type VegetaHit } from './vegeta.ts'
import { hasWrk, runWrk, writeWrkScript } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchValues } from './skeleton.ts'
import { pin } from './pin.ts'

/** Help of `cohort bench overload`. */
export const OVERLOAD_HELP = `cohort bench overload [options]
Overload as users run it (issue 27; docs/bench/overload.md): nats-server, one cohort worker serving
a deep model (--threads 1: model-bound) and an Identity model (the stack's own ceiling), and cohort
gateway, each its own process. Capacity: wrk -c128, closed loop. Open-loop load:
vegeta (Go; built once into the CI cache's bin with go install when missing) at 2x and 4x capacity
with client deadlines (X-Cohort-Timeout-Ms) and 2x with none (the server SLO), then two tenants (one
API key at 3x, the other at 15%). Two phases measure the gateway's CPU directly: answers only (0.5x,
no deadline) and refusals only (4x capacity at a 50 ms deadline: the queue is past the deadline, so
the door refuses nearly every request 503). Per step: goodput, 503 (refusal) p50/p99 beside answer p50/p99, latency
by outcome (200 / 503 / 504 / no answer) and by the error body's code, requests with no answer,
gateway CPU per request, the worker's busy fraction, log lines; then the targets, met or missed
(CPU per refusal: the refusal phase's CPU over its 503s / CPU per answer at capacity). Layouts:
  shared   every process on both cores
  pinned   the worker on core 1 (taskset); gateway, nats-server, vegeta and wrk on core 0
  serve    cohort serve (gateway and worker in one process) on both cores
  --quick            check that the bench runs, in about a minute: layout shared, 2 s steps and
                     capacity runs, the 2x step with the client deadline only (no 4x, no 2x without
                     a deadline, no tenants), then the two phases; explicit flags override it
  --layouts LIST     comma-separated (default shared,pinned,serve; --quick: shared)
  --model deep|heavy deep (default): the 512 FP32 as 8 tokens of 64, each through one MLP
                     64->2560x4->2 (~159 M multiply-adds per item, 80 MB, built once into the
                     model cache); heavy: the MLP 512->2560x3->16 (~14.5 M)
  --seconds S        seconds of each open-loop step and phase (default 6; --quick: 2); --seconds 3
                     --capacity-s 3 runs the three layouts in about 5 minutes
  --capacity-s S     seconds of the measured capacity run, after a warm-up as long (default 5;
                     --quick: 2)
  --deadline-ms MS   client deadline of the deadline steps and of both tenants (default 250)
  --refusal-deadline-ms MS  client deadline of the refusal phase (default 50; keep it above t(1):
                     a deadline no idle worker could meet is admitted, for the worker's 504)
  --refusal-multiple X      offered rate of the refusal phase, x capacity (default 4; at 8x the
                     gateway itself saturated here: socket errors and 504s, no longer refusals)
  --connections N    wrk connections of the capacity run (default 128)
  --out FILE         also write the results as JSON`

const OVERLOAD_OPTIONS = {
  quick: { type: 'boolean' },
  layouts: { type: 'string' },
  model: { type: 'string' },
  seconds: { type: 'string' },
  'capacity-s': { type: 'string' },
  'deadline-ms': { type: 'string' },
  connections: { type: 'string' },
  'refusal-deadline-ms': { type: 'string' },
  'refusal-multiple': { type: 'string' },
  out: { type: 'string' },
} satisfies BenchCommand['options']

const LAYOUTS = ['shared', 'pinned', 'serve'] as const
type LayoutName = (typeof LAYOUTS)[number]

/** The two API keys: tenant A (every step but the quiet tenant's) and tenant B. */
const KEYS = ['cohort-bench-tenant-a', 'cohort-bench-tenant-b'] as const
const IDENT = 'ident'
const FEATURES = 512
/** The server SLO's floor (max(1000, 4 x t(max batch))): the budget when the SLO cannot be read. */
const SLO_FLOOR_MS = 1000

/** The model-bound models this bench serves (both take one row of 512 FP32 named `input`). */
const MODELS = {
  deep: { describe: `deep: 512 FP32 as 8 tokens of 64, each through 64->2560x4->2 (~${Math.round(deepMacs() / 1e6)} M multiply-adds per item)`, path: () => ensureDeepModel() },
  heavy: { describe: 'heavy MLP 512->2560x3->16 (~14.5 M multiply-adds per item)', path: () => ensureHeavyModel() },
} as const
type ModelName = keyof typeof MODELS

/**
 * `--quick`: one layout (`shared`), 2 s steps and capacity runs, only the 2x step with the client
 * deadline and no tenants, then the two phases: a check that the bench runs (about a minute),
 * not a result. Explicit flags override it.
 */
export const QUICK = { layouts: ['shared'], seconds: 2, capacityS: 2, fullSteps: false } as const

/** Defaults without `--quick`. */
export const FULL = { layouts: LAYOUTS, seconds: 6, capacityS: 5, fullSteps: true } as const

function layoutsFlag(v: unknown, dflt: readonly LayoutName[]): LayoutName[] {
  const layouts = (typeof v === 'string' ? v : dflt.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const l of layouts) {
    if (!(LAYOUTS as readonly string[]).includes(l)) {
      throw new CliError(`--layouts: unknown layout "${l}" (use ${LAYOUTS.join(', ')})`)
    }
  }
  return layouts as LayoutName[]
}

function options(v: BenchValues) {
  const preset = v['quick'] === true ? QUICK : FULL
  return {
    quick: v['quick'] === true,
    layouts: layoutsFlag(v['layouts'], preset.layouts),
    model: modelFlag(v['model']),
    seconds: numFlag('seconds', v['seconds']) ?? preset.seconds,
    capacityS: intFlag('capacity-s', v['capacity-s']) ?? preset.capacityS,
    /** The three steps and the two tenants (false: the 2x step with the client deadline alone). */
    fullSteps: preset.fullSteps,
    deadlineMs: numFlag('deadline-ms', v['deadline-ms']) ?? 250,
    connections: intFlag('connections', v['connections']) ?? 128,
    /**
     * Client deadline of the refusal-only phase: short, yet above the service estimate (a deadline
     * below it is admitted on purpose, for the worker to answer 504: wait-check.ts). @default 50
     */
    refusalDeadlineMs: numFlag('refusal-deadline-ms', v['refusal-deadline-ms']) ?? 50,
    /** Offered rate of the refusal-only phase, a multiple of capacity: the queue past the deadline refuses nearly all. @default 4 */
    refusalMultiple: numFlag('refusal-multiple', v['refusal-multiple']) ?? 4,
    out: v['out'] as string | undefined,
  }
}
type Options = ReturnType<typeof options>

function modelFlag(v: unknown): ModelName {
  const m = v === undefined ? 'deep' : typeof v === 'string' ? v : JSON.stringify(v)
  if (m !== 'deep' && m !== 'heavy') {
    throw new CliError(`--model: expected deep or heavy, got "${m}"`)
  }
  return m
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function safeCpu(pid: number | undefined): number {
  try {
    return pid === undefined ? Number.NaN : cpuMicros(pid) / 1e6
  } catch {
    return Number.NaN
  }
}

/**
 * A meter over a window: CPU seconds of each named process (every thread, /proc/PID/stat) and the
 * lines and bytes `log` gained. A process started inside the window (vegeta) is read from 0 and
 * polled every 100 ms, its last reading kept (its /proc entry is gone once it exits).
 */
function meter(procs: Record<string, number | undefined>, log: () => string): { add(name: string, pid: number | undefined): void; stop(): Metered } {
  const base: Record<string, number> = {}
  const last: Record<string, number> = {}
  const pids: Record<string, number | undefined> = { ...procs }
  for (const [n, pid] of Object.entries(procs)) {
    const c = safeCpu(pid)
    base[n] = c
    last[n] = c
  }
  const logAt = log().length
  const linesAt = countLines(log())
  const t0 = performance.now()
  const poll = setInterval(() => {
    for (const [n, pid] of Object.entries(pids)) {
      const c = safeCpu(pid)
      if (Number.isFinite(c)) {
        last[n] = c
      }
    }
  }, 100)
  return {
    add(name, pid) {
      pids[name] = pid
      base[name] = 0
      last[name] = 0
    },
    stop() {
      clearInterval(poll)
      const cpuS: CpuSeconds = {}
      for (const [n, pid] of Object.entries(pids)) {
        const c = safeCpu(pid)
        cpuS[n] = (Number.isFinite(c) ? c : (last[n] ?? Number.NaN)) - (base[n] ?? Number.NaN)
      }
      const text = log()
      return { wallS: (performance.now() - t0) / 1000, cpuS, logLines: countLines(text) - linesAt, logBytes: Buffer.byteLength(text.slice(logAt)) }
    },
  }
}

function countLines(s: string): number {
  let n = 0
  for (let i = s.indexOf('\n'); i >= 0; i = s.indexOf('\n', i + 1)) {
    n++
  }
  return n
}

async function waitReady(url: string, key: string): Promise<void> {
  const until = Date.now() + 120_000
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

/** The server-side SLO the model's workers announce (ms; NaN: unread). */
async function serverSlo(nc: NatsConnection | undefined, model: string): Promise<number> {
  if (!nc) {
    return Number.NaN
  }
  try {
    const m = await nc.request(subjects().meta(model), new Uint8Array(0), { timeout: 2000 })
    const slo = (decodeValue(m.data) as { slo?: { ms?: number } }).slo?.ms
    return typeof slo === 'number' && slo > 0 ? slo : Number.NaN
  } catch {
    return Number.NaN
  }
}

/** Wait until the gateway's request count stops moving (two polls 200 ms apart, at most 10 s). */
async function settle(metricsUrl: string, model: string): Promise<void> {
  const until = performance.now() + 10_000
  let last = Number.NaN
  let still = 0
  while (still < 2 && performance.now() < until) {
    await sleep(200)
    const n = await metricTotals(metricsUrl, model).then(
      (t) => t.requestCount,
      () => Number.NaN,
    )
    still = n === last ? still + 1 : 0
    last = n
  }
}

/** The processes of one layout, started and ready. */
interface Stack {
  base: string
  gateway: Proc
  worker: Proc | undefined
  nats: Proc | undefined
  nc: NatsConnection | undefined
  /** A command in front of the load generators (taskset for `pinned`). */
  genPrefix: string[]
}

/** The first capture group of a matched line (the URL a process printed). */
function group1(m: RegExpMatchArray): string {
  const g = m[1]
  if (g === undefined) {
    throw new Error(`no capture group in ${JSON.stringify(m[0])}`)
  }
  return g
}

async function startStack(layout: LayoutName, dir: string, models: string[], procs: Proc[], log: (s: string) => void): Promise<Stack> {
  const keys = KEYS.flatMap((k) => ['--api-key', k])
  if (layout === 'serve') {
    log(`[serve] starting cohort serve`)
    const s = start('serve', process.execPath, [...cohortArgs(), 'serve', '--port', '0', '--drain-ms', '0', '--metrics-open', ...models, ...keys])
    procs.push(s)
    const base = group1(await s.waitFor(/serving .* on (http:\/\/\S+) \(/, 180_000))
    return { base, gateway: s, worker: undefined, nats: undefined, nc: undefined, genPrefix: [] }
  }
  log(`[${layout}] starting nats-server + cohort worker + cohort gateway`)
  const nats = await startNats(dir)
  procs.push(nats.p)
  const worker = start('worker', process.execPath, [...cohortArgs(), 'worker', '--nats', nats.url, ...models])
  procs.push(worker)
  await worker.waitFor(/worker \S+ serving/, 180_000)
  const gateway = start('gateway', process.execPath, [...cohortArgs(), 'gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--metrics-open', ...keys])
  procs.push(gateway)
  const base = group1(await gateway.waitFor(/gateway on (http:\/\/\S+) ->/, 180_000))
  let genPrefix: string[] = []
  if (layout === 'pinned') {
    pin(worker.proc.pid, '1')
    pin(gateway.proc.pid, '0')
    pin(nats.p.proc.pid, '0')
    genPrefix = ['taskset', '-c', '0']
  }
  return { base, gateway, worker, nats: nats.p, nc: await connect({ servers: nats.url }), genPrefix }
}

/** What one layout's measurements share: the started stack, the model's URL and body, the processes to meter. */
interface LayoutRun {
  layout: LayoutName
  o: Options
  dir: string
  st: Stack
  url: string
  body: string
  pids: Record<string, number | undefined>
  gwLog: () => string
  log: (s: string) => void
}

const LAYOUT_DESCRIPTIONS: Record<LayoutName, string> = {
  shared: 'nats-server, cohort worker, cohort gateway, vegeta and wrk on both cores',
  pinned: 'cohort worker on core 1 (taskset); gateway, nats-server, vegeta, wrk on core 0',
  serve: 'cohort serve (gateway + worker in one process), vegeta and wrk on both cores',
}

/** The same feature row as the model's body, for the Identity model (the stack's own ceiling). */
function identityBody(body: string): string {
  const data = (JSON.parse(body) as { inputs: { data: unknown }[] }).inputs[0]?.data
  return JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, FEATURES], data }] })
}

/** The stack's ceiling (Identity, closed loop), c=1 p50 of both models, then the model's closed-loop capacity (answers/s). */
async function measureCapacity(x: LayoutRun, r: LayoutResult): Promise<number> {
  const { layout, o, dir, st, url, body } = x
  const auth = { Authorization: `Bearer ${KEYS[0]}` }
  const wrkO = { allowNon2xx: true, timeoutS: 10, prefix: st.genPrefix }
  const identScript = writeWrkScript(dir, `${layout}-ident`, identityBody(body), auth)
  const identUrl = `${st.base}/v2/models/${IDENT}/infer`
  await runWrk(identUrl, identScript, o.connections, 2, wrkO)
  const ce = await runWrk(identUrl, identScript, o.connections, Math.max(2, Math.round(o.capacityS / 2)), wrkO)
  r.ceiling = (ce.requests - ce.non2xx) / ce.seconds
  const script = writeWrkScript(dir, `${layout}-${o.model}`, body, auth)
  r.pathMs = (await runWrk(identUrl, identScript, 1, 2, wrkO)).p50Ms
  r.t1Ms = (await runWrk(url, script, 1, 2, wrkO)).p50Ms
  x.log(`[${layout}] ceiling (Identity, wrk -c${o.connections}) ${Math.round(r.ceiling)}/s; c=1 p50 ${o.model} ${r.t1Ms.toFixed(1)} ms, Identity ${r.pathMs.toFixed(1)} ms`)

  // Capacity: closed loop, warmed up first (the worker's self-tuned batch cap settles).
  await runWrk(url, script, o.connections, o.capacityS, wrkO)
  const m = meter(x.pids, x.gwLog)
  const cap = await runWrk(url, script, o.connections, o.capacityS, wrkO)
  const cm = m.stop()
  const capacity: CapacityRun = { ...cm, rate: (cap.requests - cap.non2xx) / cap.seconds, answers: cap.requests - cap.non2xx, non2xx: cap.non2xx, p99Ms: cap.p99Ms }
  r.capacity = capacity
  x.log(`[${layout}] capacity ${Math.round(capacity.rate)}/s (wrk -c${o.connections}, p99 ${cap.p99Ms.toFixed(1)} ms, ${cap.non2xx} non-2xx)`)
  if (!(capacity.rate > 0)) {
    throw new Error(`the capacity run got no 200s (${cap.non2xx} non-2xx)`)
  }
  return capacity.rate
}

/** The three open-loop steps (2x and 4x with the client deadline, 2x with none), the two tenants, then the answer-only and refusal-only phases, at multiples of capacity C. */
async function overloadSteps(x: LayoutRun, r: LayoutResult, vegeta: string, C: number, sloMs: number): Promise<void> {
  const { layout, o, dir, st, url, body, pids, gwLog } = x
  const target = (name: string, key: string, deadline: number | undefined) =>
    writeVegetaTargets(dir, `${layout}-${name}`, url, body, { Authorization: `Bearer ${key}`, ...(deadline !== undefined ? { 'X-Cohort-Timeout-Ms': String(deadline) } : {}) })
  const spec = (label: string, multiple: number, deadline: number | undefined): StepSpec => ({
    label,
    multiple,
    rate: multiple * C,
    clientDeadlineMs: deadline,
    sloMs,
    capacity: C,
  })
  const go = (name: string, key: string, rate: number, deadline: number | undefined) =>
    attack({ vegeta, targets: target(name, key, deadline), rate, durationS: o.seconds, output: join(dir, `${layout}-${name}.bin`), prefix: st.genPrefix })
  const step = async (label: string, multiple: number, deadline: number | undefined): Promise<LayoutStep> => {
    const mm = meter(pids, gwLog)
    const a = go(label.replace(/\W+/g, '_'), KEYS[0], multiple * C, deadline)
    mm.add('vegeta', a.pid)
    const hits = await a.done
    const s = { ...summariseOverloadStep(spec(label, multiple, deadline), vegetaRecords(hits, o.seconds)), ...mm.stop() }
    x.log(
      `[${layout}] ${label} ${deadline !== undefined ? `deadline ${deadline} ms` : `no deadline (SLO ${sloMs} ms)`}: goodput ${s.goodputFraction.toFixed(2)}, ok p99 ${s.okP99.toFixed(1)} ms, 503 p99 ${s.refusalP99.toFixed(1)} ms, ${JSON.stringify(s.byStatus)}`,
    )
    await settle(`${st.base}/metrics`, o.model)
    return s
  }
  r.steps.push(await step('2x', 2, o.deadlineMs))
  if (o.fullSteps) {
    r.steps.push(await step('4x', 4, o.deadlineMs))
    r.steps.push(await step('2x', 2, undefined))
    r.tenants = await twoTenants(x, go, spec)
    await settle(`${st.base}/metrics`, o.model)
  }
  // Last, the answer-only and refusal-only phases (the CPU of one open-loop answer, of one refusal):
  // the refusal flood's late outcomes raise the admission margin, which would lower the goodput of a step after it.
  r.answerPhase = await step('answers 0.5x', 0.5, undefined)
  r.refusalPhase = await step(`refusals ${o.refusalMultiple}x`, o.refusalMultiple, o.refusalDeadlineMs)
}

/** Two tenants at once: key A at 3x, key B at 15 %, both with the client deadline (one CPU window). */
async function twoTenants(
  x: LayoutRun,
  go: (name: string, key: string, rate: number, deadline: number | undefined) => RunningAttack,
  spec: (label: string, multiple: number, deadline: number | undefined) => StepSpec,
): Promise<{ flood: LayoutStep; quiet: LayoutStep }> {
  const { o, pids, gwLog } = x
  const C = spec('', 1, undefined).capacity
  const tm = meter(pids, gwLog)
  const fa = go('flood', KEYS[0], 3 * C, o.deadlineMs)
  const qa = go('quiet', KEYS[1], 0.15 * C, o.deadlineMs)
  tm.add('vegeta', fa.pid)
  tm.add('vegeta2', qa.pid)
  const [fh, qh] = await Promise.all([fa.done, qa.done])
  const t0 = Math.min(fh[0]?.atMs ?? Infinity, qh[0]?.atMs ?? Infinity)
  const w = tm.stop()
  const rec = (h: VegetaHit[]) => vegetaRecords(h, o.seconds, t0)
  const tenants = {
    flood: { ...summariseOverloadStep(spec('tenant A 3x', 3, o.deadlineMs), rec(fh)), ...w },
    quiet: { ...summariseOverloadStep(spec('tenant B 15%', 0.15, o.deadlineMs), rec(qh)), ...w },
  }
  x.log(`[${x.layout}] quiet tenant: ${tenants.quiet.goodShare.toFixed(2)} of ${tenants.quiet.sent} on time`)
  return tenants
}

/** Run one layout: t(1), the Identity ceiling, capacity, the three steps, the two tenants. */
async function runLayout(layout: LayoutName, o: Options, dir: string, vegeta: string, procs: Proc[], log: (s: string) => void, sloHint: number): Promise<LayoutResult> {
  const model = o.model
  const ident = identityModel(dir, FEATURES)
  const models = ['--model', `${model}=${MODELS[model].path()}`, '--model', `${IDENT}=${ident}`, '--threads', '1']
  const r: LayoutResult = {
    layout,
    describe: LAYOUT_DESCRIPTIONS[layout],
    gatewayProc: layout === 'serve' ? 'serve' : 'gateway',
    workerProc: layout === 'serve' ? undefined : 'worker',
    t1Ms: Number.NaN,
    pathMs: Number.NaN,
    ceiling: Number.NaN,
    capacity: { rate: Number.NaN, answers: 0, non2xx: 0, p99Ms: Number.NaN, wallS: Number.NaN, cpuS: {}, logLines: 0, logBytes: 0 },
    steps: [],
    tenants: undefined,
    refusalPhase: undefined,
    answerPhase: undefined,
    errors: [],
  }
  try {
    const st = await startStack(layout, dir, models, procs, log)
    await waitReady(`${st.base}/v2/models/${model}`, KEYS[0])
    const pids: Record<string, number | undefined> =
      layout === 'serve' ? { serve: st.gateway.proc.pid } : { gateway: st.gateway.proc.pid, worker: st.worker?.proc.pid, nats: st.nats?.proc.pid }
    const x: LayoutRun = { layout, o, dir, st, url: `${st.base}/v2/models/${model}/infer`, body: demoBody(FEATURES), pids, gwLog: () => st.gateway.out(), log }
    const C = await measureCapacity(x, r)
    // cohort serve has no NATS to ask: it takes the SLO a NATS layout of this run read, else the floor.
    const slo = await serverSlo(st.nc, model)
    const sloMs = Number.isFinite(slo) ? slo : Number.isFinite(sloHint) ? sloHint : SLO_FLOOR_MS
    await overloadSteps(x, r, vegeta, C, sloMs)
    await st.nc?.close().catch(() => undefined)
  } catch (e) {
    const msg = e instanceof Error ? (e.message.split('\n')[0] ?? e.message) : String(e)
    log(`[${layout}] failed: ${msg}`)
    r.errors.push(msg)
  } finally {
    for (const p of procs) {
      if (p.proc.exitCode !== null || p.proc.signalCode !== null) {
        r.errors.push(`${p.name} exited during the run (${p.proc.signalCode ?? p.proc.exitCode}); its last output: ${p.out().slice(-600)}`)
      }
    }
    await stopAll(procs)
    procs.length = 0
  }
  return r
}

export interface OverloadResult {
  startedAt: string
  commit: string
  command: string
  wallS: number
  vegeta: string
  machine: ReturnType<typeof machineInfo> & { procLoadavg: [string, string] }
  options: Omit<Options, 'out'>
  layouts: LayoutResult[]
}

const loadavgText = () => {
  try {
    return readFileSync('/proc/loadavg', 'utf8').trim()
  } catch {
    return 'n/a'
  }
}

const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a')

/** The report: run info, per layout its ceiling, capacity and steps, then the targets. */
export function formatOverload(r: OverloadResult): string {
  const out: string[] = []
  out.push(`${r.command} @ ${r.commit}, ${r.startedAt}; ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}; ${(r.wallS / 60).toFixed(1)} min`)
  out.push(`/proc/loadavg at start: ${r.machine.procLoadavg[0]}; at end: ${r.machine.procLoadavg[1]}`)
  out.push(
    `model: ${MODELS[r.options.model].describe}, --threads 1, one row of 512 FP32 as OIP JSON; open loop: ${r.vegeta} (constant rate, -timeout 10s: no answer in 10 s = no answer), ${r.options.seconds} s per step; ` +
      `capacity: wrk -c${r.options.connections} ${r.options.capacityS} s after a warm-up as long; client deadline ${r.options.deadlineMs} ms or none (the server SLO)`,
  )
  out.push(
    '\n' +
      table(
        [
          'layout',
          'placement',
          `c=1 p50 ms: ${r.options.model} / Identity (t(1) ~ the difference)`,
          'ceiling (Identity) /s',
          `capacity (${r.options.model}) /s`,
          'ceiling / capacity',
        ],
        r.layouts.map((l) => [l.layout, l.describe, `${f(l.t1Ms)} / ${f(l.pathMs)}`, f(l.ceiling, 0), f(l.capacity.rate, 0), f(l.ceiling / l.capacity.rate, 1)]),
      ),
  )
  for (const l of r.layouts) {
    out.push(`\n=== ${l.layout}: ${l.describe}`)
    for (const e of l.errors) {
      out.push(`FAILED ${e}`)
    }
    out.push(layoutStepTable(l))
    out.push(layoutOutcomeTable(l))
  }
  out.push(
    `\nCPU per refusal is measured in the refusal-only phase (${r.options.refusalMultiple}x capacity at a ${r.options.refusalDeadlineMs} ms client deadline): ` +
      'gateway CPU over the phase (/proc) / its 503s; per answer: gateway CPU / 200s of the capacity run (and of the answer-only phase, 0.5x, open loop). ' +
      'Worker busy = worker CPU s/s in the step / the same at capacity. "503 p50/p99" is the refusals\' latency; every outcome and error code is in the second table.',
  )
  out.push('\nTargets (issue 27)')
  out.push(layoutTargetTable(layoutTargets(r.layouts)))
  return out.join('\n')
}

/** vegeta's version (`-version` is empty in a `go install` build: then the module version the binary records). */
function vegetaVersion(bin: string): string {
  try {
    const v = /Version:[ \t]*(\S+)/.exec(execFileSync(bin, ['-version']).toString())?.[1]
    return v ?? /\bmod\s+\S+\s+(\S+)/.exec(execFileSync('go', ['version', '-m', bin]).toString())?.[1] ?? '?'
  } catch {
    return '?'
  }
}

/** `cohort bench overload`: issue 27's layouts. Every child process is stopped on exit, on errors and on SIGINT/SIGTERM. */
export const benchOverloadCommand = defineBenchCommand({
  help: OVERLOAD_HELP,
  options: OVERLOAD_OPTIONS,
  run: async (v, _positionals, { args, track, log, startedAt, t0, load0, writeJson }) => {
    const o = options(v)
    if (!hasWrk()) {
      throw new CliError('cohort bench overload needs wrk for its capacity runs (apt-get install -y wrk)')
    }
    const vegeta = ensureVegeta(log)
    const version = vegetaVersion(vegeta)
    const la0 = loadavgText()
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-overload-'))
    track(() => {
      rmSync(dir, { recursive: true, force: true })
      return Promise.resolve()
    })
    const procs: Proc[] = []
    track(() => stopAll(procs))
    track(() => {
      killAttacks()
      return Promise.resolve()
    })
    const layouts: LayoutResult[] = []
    let slo = Number.NaN
    for (const l of o.layouts) {
      const r = await runLayout(l, o, dir, vegeta, procs, log, slo)
      slo = r.steps.find((s) => s.clientDeadlineMs === undefined)?.budgetMs ?? slo
      layouts.push(r)
    }
    const { out, ...opts } = o
    const result: OverloadResult = {
      startedAt,
      commit: gitCommit(),
      command: `cohort bench overload ${args.join(' ')}`.trim(),
      wallS: (performance.now() - t0) / 1000,
      vegeta: `vegeta ${version}`,
      machine: { ...machineInfo(load0), procLoadavg: [la0, loadavgText()] },
      options: opts,
      layouts,
    }
    console.log(formatOverload(result))
    if (out) {
      writeJson(out, result)
    }
    if (layouts.some((x) => x.errors.length > 0)) {
      throw new CliError(`some layouts failed: ${layouts.flatMap((x) => x.errors.map((e) => `${x.layout}: ${e}`)).join('; ')}`)
    }
  },
})
