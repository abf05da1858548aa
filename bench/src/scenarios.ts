import { spawnCohort, type CliProcess } from '@cohort/test-support'
import { runNodeLoad } from './client.ts'
import type { LoadGenerator } from './load-worker.ts'
import { waitReady } from './served.ts'
import { metricTotals, summariseStep, type StepResult } from './step-stats.ts'
import { runWrk, type SaturationResult } from './wrk.ts'
import { seedOf } from './seed.ts'

/** One batching configuration under test. */
export interface PolicyConfig {
  /** Label: eager, deadline, timer-5, nobatch, ... */
  name: string
  policy: 'eager' | 'deadline' | 'timer'
  /** --max-delay-ms (timer: the hold; deadline: the longest wait for company). */
  maxDelayMs?: number
  maxBatchSize: number
  /**
   * Admission turned off: `'both'` (`-noadm`: `--no-admission --no-front-door`, the behaviour
   * before admission), `'queue'` (`-noqa`: `--no-admission`), `'door'` (`-nofd`: `--no-front-door`).
   */
  noAdmission?: 'both' | 'queue' | 'door'
}

/** A model as the policies bench serves and loads it. */
export interface BenchModel {
  /** Served model name (also the `model` label of its metrics). */
  name: string
  /** `cohort serve` flags that load it and its `floor` model. */
  serveArgs: string[]
  /** Env of the serve process. */
  env: Record<string, string>
  /** URL path of one request, for the model and for its floor model. */
  path: string
  floorPath: string
  body: string
  floorBody: string
  /** wrk Lua script POSTing `body` (undefined: Node fallback). */
  wrkScript: string | undefined
}

/** Durations and load points of a run. */
export interface ScenarioPlan {
  /** Seconds per sweep and overload step. */
  stepS: number
  /** Seconds per SLO-search probe, and the number of probes. */
  searchS: number
  searchProbes: number
  /** wrk warm-up and measured seconds of the capacity run. */
  capWarmS: number
  capS: number
  /** wrk connections of the capacity run. */
  connections: number
  /** Connection cap of the open-loop generator (beyond it, requests wait in the client). */
  maxSockets: number
  /** Seconds of each burst window. */
  burstS: number
  /** Low load: at most this many seconds (aims at 150 requests, at least stepS). */
  lowMaxS: number
  /** Idle ms between steps (so one step's queue does not leak into the next). */
  gapMs: number
  /** Sweep points, overload multiples of the SLO capacity, burst multiples of capacity. */
  sweep: number[]
  overload: number[]
  bursts: number[]
  /** Low-load fraction of the config's own closed-loop capacity. */
  low: number
  /** Generator lag (ms) above which a step counts as disturbed. */
  maxLagMs: number
  /** Re-runs per config of sweep/search steps that missed the SLO while disturbed. */
  retries: number
}

/** Everything measured for one (model, policy config). */
export interface ConfigResult {
  config: PolicyConfig
  /** Closed-loop saturation run (wrk -c<connections>) of this config. */
  capacity: SaturationResult & { meanBatch: number }
  /** The model's reference rate (req/s) that sweep and burst rates are fractions of. */
  referenceRate: number
  /** The SLO used (ms). */
  sloMs: number
  floor: StepResult
  low: StepResult
  sweep: StepResult[]
  search: StepResult[]
  /** Highest rate whose p99 (over all requests) met the SLO; 0 if none did. */
  capacityAtSlo: number
  /** The step measured at that rate. */
  atSlo: StepResult | undefined
  /** True when even the highest rate tried met the SLO (capacityAtSlo is a lower bound). */
  atSloOpen: boolean
  bursts: StepResult[]
  overload: StepResult[]
  /** Seconds this config took, server start included. */
  wallS: number
}

/** What {@link runConfig} needs besides the model and the config. */
export interface ScenarioContext {
  model: BenchModel
  config: PolicyConfig
  plan: ScenarioPlan
  gen: LoadGenerator
  /** --threads, --ep and extra serve flags (e.g. --max-queue). */
  serveFlags: string[]
  /** The model's reference rate, given this config's closed-loop capacity (the first config fixes it). */
  reference: (closedLoopRate: number) => number
  /** The SLO in ms, given this config's floor p50 (the first config of a model fixes it). */
  slo: (floorP50Ms: number) => number
  /** Register a stop function as soon as a process exists (Ctrl-C). */
  track: (stop: () => Promise<void>) => void
  untrack: (stop: () => Promise<void>) => void
  log: (msg: string) => void
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** `cohort serve` flags of a policy config. */
export function configFlags(c: PolicyConfig): string[] {
  const out = ['--policy', c.policy, '--max-batch-size', String(c.maxBatchSize)]
  if (c.noAdmission === 'both' || c.noAdmission === 'queue') {
    out.push('--no-admission')
  }
  if (c.noAdmission === 'both' || c.noAdmission === 'door') {
    out.push('--no-front-door')
  }
  return c.maxDelayMs !== undefined ? [...out, '--max-delay-ms', String(c.maxDelayMs)] : out
}

async function startServe(ctx: ScenarioContext): Promise<{ base: string; stop: () => Promise<void> }> {
  const p: CliProcess = spawnCohort(['serve', '--port', '0', ...ctx.model.serveArgs, ...ctx.serveFlags, ...configFlags(ctx.config)], ctx.model.env)
  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= p.stop('SIGTERM', 5000).then(() => undefined))
  ctx.track(stop)
  try {
    const m = await p.waitFor(/serving .* on (http:\/\/\S+) \(embedded\)/, 60_000)
    const base = m[1] as string
    await waitReady(`${base}/v2/models/${ctx.model.name}`)
    return { base, stop }
  } catch (e) {
    await stop()
    ctx.untrack(stop)
    throw e
  }
}

/**
 * Capacity at the SLO from the sweep, then bisection: `lo` = the highest sweep rate that met the
 * SLO, `hi` = the lowest rate above it that missed (a miss below a pass is taken as noise). With no
 * miss above `lo`, probe upwards by 1.5x first. At most `probes` extra steps; stops within 3 %.
 */
export async function searchSlo(
  sweep: StepResult[],
  probes: number,
  probe: (rate: number) => Promise<StepResult>,
): Promise<{ lo: number; hi: number | undefined; atSlo: StepResult | undefined }> {
  const sorted = [...sweep].sort((a, b) => a.rate - b.rate)
  let atSlo = sorted.filter((s) => s.meetsSlo).pop()
  let lo = atSlo?.rate ?? 0
  let hi = sorted.find((s) => s.rate > lo && !s.meetsSlo)?.rate
  while (probes > 0 && (hi === undefined ? lo > 0 : hi - lo > 0.03 * hi)) {
    probes--
    const rate = hi === undefined ? lo * 1.5 : (lo + hi) / 2
    const s = await probe(rate)
    if (s.meetsSlo) {
      lo = rate
      atSlo = s
    } else {
      hi = rate
    }
  }
  return { lo, hi, atSlo }
}

/** Closed-loop capacity (wrk, else a Node load; after a warm-up) with the mean batch over it. */
async function serveCapacity(ctx: ScenarioContext, url: string, metricsUrl: string) {
  const { model, plan } = ctx
  const load = (s: number) => (model.wrkScript ? runWrk(url, model.wrkScript, plan.connections, s) : runNodeLoad(url, model.body, plan.connections, s))
  await load(plan.capWarmS)
  const cb = await metricTotals(metricsUrl, model.name)
  const sat = await load(plan.capS)
  const ca = await metricTotals(metricsUrl, model.name)
  return { ...sat, meanBatch: (ca.batchSum - cb.batchSum) / Math.max(1, ca.batchCount - cb.batchCount) }
}

/**
 * The open-loop step of one config: `label` at `rate` req/s for `durationS` with the SLO of the
 * moment as the request timeout (`floor`: on the floor model; `retry`: run again, a bounded number
 * of times per config, when the SLO was missed while the generator lagged).
 */
function scenarioStep(ctx: ScenarioContext, base: string, metricsUrl: string, C: number, tag: string, sloMs: () => number) {
  const { model, plan, gen, log } = ctx
  let retries = plan.retries
  return async (label: string, rate: number, durationS: number, o: { floor?: boolean; retry?: boolean } = {}): Promise<StepResult> => {
    const name = o.floor ? 'floor' : model.name
    for (let attempt = 1; ; attempt++) {
      const slo = sloMs()
      const before = await metricTotals(metricsUrl, name)
      const rec = await gen.run({
        url: base + (o.floor ? model.floorPath : model.path),
        body: o.floor ? model.floorBody : model.body,
        headers: Number.isFinite(slo) ? { 'x-cohort-timeout-ms': slo.toFixed(3) } : {},
        rate,
        durationS,
        seed: seedOf(label) + attempt,
        maxSockets: plan.maxSockets,
        drainMs: (Number.isFinite(slo) ? slo : 1000) + 3000,
      })
      const after = await metricTotals(metricsUrl, name)
      await sleep(plan.gapMs)
      const s = { ...summariseStep(label, rate / C, rate, rec, Number.isFinite(slo) ? slo : Number.POSITIVE_INFINITY, before, after), attempts: attempt }
      const lagged = s.lagMaxMs > plan.maxLagMs
      if (lagged) {
        log(`${tag} ${label}: the load generator fell behind its schedule by up to ${s.lagMaxMs.toFixed(1)} ms (p99 ${s.lagP99Ms.toFixed(1)} ms)`)
      }
      // A missed SLO while the generator itself was held up is likely the machine, not the
      // policy: run the step again (a bounded number of times per config).
      if (!(o.retry && lagged && !s.meetsSlo && retries > 0)) {
        return s
      }
      retries--
      log(`${tag} ${label}: SLO missed while the generator lagged; running it again`)
    }
  }
}

/**
 * Serve one model with one policy config (`cohort serve`, its own process) and run the scenarios:
 * capacity (closed loop), floor and low load, the rate sweep, the SLO capacity search, bursts
 * from idle and overload, all open-loop Poisson from the load-generator process with
 * `x-cohort-timeout-ms` = SLO. Stops the server before returning.
 */
export async function runConfig(ctx: ScenarioContext): Promise<ConfigResult> {
  const t0 = performance.now()
  const { model, plan, log } = ctx
  const tag = `[${model.name} ${ctx.config.name}]`
  const { base, stop } = await startServe(ctx)
  const metricsUrl = `${base}/metrics`
  const url = base + model.path
  try {
    log(`${tag} capacity: wrk -c${plan.connections}, ${plan.capWarmS} s warm-up + ${plan.capS} s`)
    const capacity = await serveCapacity(ctx, url, metricsUrl)
    const own = capacity.requestsPerSec
    const C = ctx.reference(own)
    const lowRate = Math.max(1, plan.low * own)
    const lowS = Math.min(plan.lowMaxS, Math.max(plan.stepS, 150 / lowRate))
    let sloMs = Number.NaN
    const step = scenarioStep(ctx, base, metricsUrl, C, tag, () => sloMs)
    log(
      `${tag} closed-loop ${Math.round(own)} req/s (mean batch ${capacity.meanBatch.toFixed(1)}), reference ${Math.round(C)} req/s; floor and low load at ${lowRate.toFixed(1)} req/s for ${lowS.toFixed(1)} s`,
    )
    await step('floor warm-up', lowRate, Math.min(1, lowS), { floor: true })
    const floor = await step('floor', lowRate, lowS, { floor: true })
    sloMs = ctx.slo(floor.p50)
    const low = await step('low load', lowRate, lowS)
    log(`${tag} floor p50 ${floor.p50.toFixed(2)} ms, low-load p50 ${low.p50.toFixed(2)} ms, SLO ${sloMs.toFixed(1)} ms; sweep ${plan.sweep.map((f) => `${f * 100}%`).join(' ')}`)
    const sweep: StepResult[] = []
    for (const f of plan.sweep) {
      sweep.push(await step(`sweep ${Math.round(f * 100)}%`, f * C, plan.stepS, { retry: true }))
    }
    const search: StepResult[] = []
    const { lo, hi, atSlo } = await searchSlo(sweep, plan.searchProbes, async (rate) => {
      const s = await step(`search ${search.length}`, rate, plan.searchS, { retry: true })
      search.push(s)
      return s
    })
    log(`${tag} capacity at SLO ${Math.round(lo)} req/s${hi === undefined ? ' (or more)' : ''}; bursts, then overload`)
    const bursts: StepResult[] = []
    for (const m of plan.bursts) {
      await sleep(1000)
      bursts.push(await step(`burst ${m}x`, m * C, plan.burstS))
    }
    const overloadBase = lo > 0 ? lo : C
    const overload: StepResult[] = []
    for (const m of plan.overload) {
      overload.push(await step(`overload ${m}x`, m * overloadBase, plan.stepS))
    }
    return {
      config: ctx.config,
      capacity,
      referenceRate: C,
      sloMs,
      floor,
      low,
      sweep,
      search,
      capacityAtSlo: lo,
      atSlo,
      atSloOpen: hi === undefined,
      bursts,
      overload,
      wallS: (performance.now() - t0) / 1000,
    }
  } finally {
    await stop()
    ctx.untrack(stop)
  }
}
