import type { LoadGenerator } from './load-worker.ts'
import { runPerfAnalyzer, type PaRow } from './peers-pa.ts'
import type { Target } from './peers-targets.ts'
import { searchSlo } from './scenarios.ts'
import { summariseStep, type MetricTotals, type StepResult } from './step-stats.ts'
import { parseWrk, runWrk, writeWrkScript, type SaturationResult } from './wrk.ts'
import { seedOf } from './seed.ts'

/** Durations and load points of one target's run (`cohort bench peers`). */
export interface PeerPlan {
  /** Seconds per sweep, search and overload step. */
  stepS: number
  /** SLO-search probes after the sweep. */
  searchProbes: number
  /** wrk warm-up and measured seconds of the closed-loop capacity run, and its connections. */
  capWarmS: number
  capS: number
  connections: number
  /** Connection cap of the open-loop generator. */
  maxSockets: number
  /** Low load: this fraction of the target's own closed-loop capacity, for at most lowMaxS s. */
  low: number
  lowMaxS: number
  /** Sweep points (fractions of the target's own closed-loop capacity). */
  sweep: number[]
  /** Overload multiple of the target's capacity at the SLO. */
  overload: number
  /** Idle ms after a step (longer after a step that missed the SLO: its backlog drains). */
  gapMs: number
}

/** Everything measured for one target. Latencies in ms, rates per second. */
export interface TargetResult {
  name: string
  description: string
  batching: boolean
  /** Closed-loop saturation (wrk) with its mean batch size (NaN: not exposed). */
  capacity: SaturationResult & { meanBatch: number }
  /** Cohort only: the Identity model at the low-load rate. */
  floor: StepResult | undefined
  low: StepResult
  sweep: StepResult[]
  search: StepResult[]
  /** Highest open-loop rate whose p99 over all requests met the SLO (0: none did). */
  capacityAtSlo: number
  atSlo: StepResult | undefined
  /** True when even the highest rate tried met the SLO (a lower bound). */
  atSloOpen: boolean
  overload: StepResult
  /** perf_analyzer rows (OIP targets, with --perf-analyzer), or why it failed. */
  perfAnalyzer?: PaRow[] | { error: string }
  /** Seconds this target took, start-up included, and its start-up alone. */
  wallS: number
  startS: number
}

/** What {@link runTarget} needs besides the target. */
export interface RunContext {
  plan: PeerPlan
  gen: LoadGenerator
  /** Folder for the wrk script. */
  dir: string
  /** The SLO in ms; called once with the floor p50 (NaN without a floor). */
  slo: (floorP50Ms: number) => number
  track: (stop: () => Promise<void>) => void
  untrack: (stop: () => Promise<void>) => void
  log: (msg: string) => void
  /** perf_analyzer and its concurrencies, run against OIP targets after the open-loop steps. */
  perfAnalyzer?: { pa: { bin: string; env: NodeJS.ProcessEnv }; concurrencies: number[] }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const NO_TOTALS: MetricTotals = { batchSum: 0, batchCount: 0, computeSum: 0, computeCount: 0, requestSum: 0, requestCount: 0, costA: Number.NaN, costC: Number.NaN, shed: {} }

/**
 * Closed-loop wrk run that tolerates load shedding: a server that answers some requests 503 by
 * design (BentoML's max_latency_ms) still has a capacity. requestsPerSec counts 2xx answers only;
 * non2xx says how many were refused. Socket errors still fail the run.
 */
export async function closedLoop(url: string, script: string, connections: number, seconds: number): Promise<SaturationResult> {
  try {
    return await runWrk(url, script, connections, seconds)
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e)
    if (!/^wrk got \d+ non-2xx responses/.test(msg)) {
      throw e
    }
    const r = parseWrk(msg.slice(msg.indexOf('\n') + 1))
    return { tool: 'wrk', ...r, requestsPerSec: (r.requests - r.non2xx) / r.seconds }
  }
}

/**
 * 50 warm-up requests, then the closed-loop capacity (wrk, after its own warm-up) with the mean
 * batch over it; `upLine` is logged between the two.
 */
async function measureCapacity(target: Target, url: string, ctx: RunContext, totals: () => Promise<MetricTotals>, upLine: string): Promise<TargetResult['capacity']> {
  const { plan } = ctx
  for (let i = 0; i < 50; i++) {
    const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: target.body })
    await r.arrayBuffer()
  }
  const script = writeWrkScript(ctx.dir, target.name, target.body)
  ctx.log(upLine)
  await closedLoop(url, script, plan.connections, plan.capWarmS)
  const cb = await totals()
  const sat = await closedLoop(url, script, plan.connections, plan.capS)
  const ca = await totals()
  return { ...sat, meanBatch: ca.batchCount > cb.batchCount ? (ca.batchSum - cb.batchSum) / (ca.batchCount - cb.batchCount) : Number.NaN }
}

/** perf_analyzer against the target's OIP endpoint (after a 2 s pause); its error instead when it fails. */
async function perfAnalyzerRun(pa: NonNullable<RunContext['perfAnalyzer']>, base: string, log: RunContext['log'], tag: string): Promise<TargetResult['perfAnalyzer']> {
  log(`${tag} perf_analyzer at concurrency ${pa.concurrencies.join(', ')}`)
  await sleep(2000)
  return runPerfAnalyzer(pa.pa, base, pa.concurrencies).catch((e: unknown) => {
    const error = e instanceof Error ? e.message : String(e)
    log(`${tag} perf_analyzer failed: ${error.split('\n')[0]}`)
    return { error }
  })
}

/** One open-loop step of a target: `label`, `rate` req/s for `durationS` (`floor`: on its floor path). */
type Step = (label: string, rate: number, durationS: number, o?: { floor?: boolean }) => Promise<StepResult>

/** The target's HTTP floor at low load, after a warm-up step of at most 1 s. */
async function floorSteps(step: Step, lowRate: number, lowS: number): Promise<StepResult> {
  await step('floor warm-up', lowRate, Math.min(1, lowS), { floor: true })
  return step('floor', lowRate, lowS, { floor: true })
}

/**
 * Start one target and measure it the way `cohort bench policies` measures a policy config
 * (scenarios.ts), with its own closed-loop capacity as the reference: capacity (wrk), low load,
 * the rate sweep, the SLO capacity search, then overload at a multiple of the capacity at the SLO.
 * Every open-loop step is Poisson from the load-generator process; no deadline header is sent
 * (every server at its defaults). Stops the server before returning.
 */
export async function runTarget(target: Target, ctx: RunContext): Promise<TargetResult> {
  const t0 = performance.now()
  const { plan, gen, log } = ctx
  const tag = `[${target.name}]`
  log(`${tag} starting: ${target.description}`)
  const server = await target.start(log)
  ctx.track(server.stop)
  const startS = (performance.now() - t0) / 1000
  const url = server.base + target.path
  const totals = async () => (await server.totals()) ?? NO_TOTALS
  try {
    const upLine = `${tag} up in ${startS.toFixed(1)} s; capacity: wrk -c${plan.connections}, ${plan.capWarmS} s warm-up + ${plan.capS} s`
    const capacity = await measureCapacity(target, url, ctx, totals, upLine)
    const own = capacity.requestsPerSec
    const lowRate = Math.max(1, plan.low * own)
    const lowS = Math.min(plan.lowMaxS, Math.max(plan.stepS, 150 / lowRate))
    let sloMs = Number.NaN
    const step: Step = async (label, rate, durationS, o = {}) => {
      const floor = o.floor ? target.floor : undefined
      const before = floor ? NO_TOTALS : await totals()
      const rec = await gen.run({
        url: server.base + (floor ? floor.path : target.path),
        body: floor ? floor.body : target.body,
        rate,
        durationS,
        seed: seedOf(label),
        maxSockets: plan.maxSockets,
        drainMs: (Number.isFinite(sloMs) ? sloMs : 1000) + 5000,
      })
      const after = floor ? NO_TOTALS : await totals()
      const s = summariseStep(label, rate / own, rate, rec, Number.isFinite(sloMs) ? sloMs : Number.POSITIVE_INFINITY, before, after)
      if (s.lagMaxMs > 10) {
        log(`${tag} ${label}: the load generator fell behind its schedule by up to ${s.lagMaxMs.toFixed(1)} ms`)
      }
      await sleep(s.meetsSlo ? plan.gapMs : 3 * plan.gapMs)
      return s
    }
    log(`${tag} closed-loop ${Math.round(own)} req/s (mean batch ${capacity.meanBatch.toFixed(1)}); low load at ${lowRate.toFixed(1)} req/s for ${lowS.toFixed(1)} s`)
    const floor = target.floor ? await floorSteps(step, lowRate, lowS) : undefined
    sloMs = ctx.slo(floor?.p50 ?? Number.NaN)
    const low = await step('low load', lowRate, lowS)
    log(`${tag} low-load p50 ${low.p50.toFixed(2)} ms p99 ${low.p99.toFixed(2)} ms; SLO ${sloMs.toFixed(1)} ms; sweep ${plan.sweep.map((f) => `${f * 100}%`).join(' ')}`)
    const sweep: StepResult[] = []
    for (const f of plan.sweep) {
      sweep.push(await step(`sweep ${Math.round(f * 100)}%`, f * own, plan.stepS))
    }
    const search: StepResult[] = []
    const { lo, hi, atSlo } = await searchSlo(sweep, plan.searchProbes, async (rate) => {
      const s = await step(`search ${search.length}`, rate, plan.stepS)
      search.push(s)
      return s
    })
    const over = plan.overload * (lo > 0 ? lo : own)
    log(`${tag} capacity at SLO ${Math.round(lo)} req/s${hi === undefined ? ' (or more)' : ''}; overload ${plan.overload}x = ${Math.round(over)} req/s`)
    const overload = await step(`overload ${plan.overload}x`, over, plan.stepS)
    const perfAnalyzer = ctx.perfAnalyzer && target.oip ? await perfAnalyzerRun(ctx.perfAnalyzer, server.base, log, tag) : undefined
    return {
      name: target.name,
      description: target.description,
      batching: target.batching,
      capacity,
      floor,
      low,
      sweep,
      search,
      capacityAtSlo: lo,
      atSlo,
      atSloOpen: hi === undefined,
      overload,
      ...(perfAnalyzer ? { perfAnalyzer } : {}),
      wallS: (performance.now() - t0) / 1000,
      startS,
    }
  } finally {
    await server.stop()
    ctx.untrack(server.stop)
  }
}
