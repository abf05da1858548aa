import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeValue, SERVICE_NAME, serviceSubject, subjects } from '@cohort/protocol'
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
  layoutLabel,
  tenantShares,
  tenantShareTable,
  type CpuShare,
  type MeasuredStep,
  type ModelOverload,
  type MultiTenantFlood,
  type StepSpec,
} from './overload-stats.ts'
import type { LoadStep } from './poisson.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { metricTotals, type MetricTotals } from './step-stats.ts'
import { cpuMicros, start, startNats, stopAll, type Proc } from './tax.ts'
import { hasWrk, runWrk, writeWrkScript, type SaturationResult } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchValues } from './skeleton.ts'
import { seedOf } from './seed.ts'

/** Help of `cohort bench overload`. */
export const OVERLOAD_HELP = `cohort bench overload [options]
Issue 14's overload targets in one run (docs/benchmarks.md#overload): per model, nats-server +
cohort worker (--threads 1) + cohort gateway (two API keys), each its own process; capacity =
closed-loop wrk -c128; open-loop Poisson steps at 1.5x, 2x, 4x capacity and a 10x burst, each with
a client deadline (x-cohort-timeout-ms) and with none (the server-side SLO); a two-tenant flood
(one key at 3x, the other at 15%), for sleep-based models also with several workers and gateways
(--tenants-multi); then the targets, met or missed.
  --models LIST        heavy, demo, affine (default heavy,demo,affine): the heavy MLP
                       512->2560x3->16, the demo MLP 256->1024->1024->10, the sleep-based affine
                       predictor (test/fixtures/affine-predictor.ts, t(b) = 5 + 0.5 b ms)
  --step-s S           seconds per overload step (default 3)
  --burst-s S          seconds of the 10x burst (default 0.5)
  --tenant-s S         seconds of the two-tenant flood (default 4)
  --deadline-ms MS     client deadline of the "with deadline" steps (default 250)
  --tenant-deadline-ms MS  client deadline of both tenants (default 500)
  --tenants-multi WxG  for sleep-based models (affine), the two-tenant flood again with W worker and
                       G gateway processes (each tenant round robin over the gateways), beside the
                       1x1 run (default 2x2; none: skip)
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
  'tenants-multi': { type: 'string' },
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
    tenantsMulti: layoutFlag(v['tenants-multi']),
    connections: intFlag('connections', v['connections']) ?? 128,
    capacityS: intFlag('capacity-s', v['capacity-s']) ?? 2,
    capacityWarmS: intFlag('capacity-warm-s', v['capacity-warm-s']) ?? 8,
    maxSockets: intFlag('max-sockets', v['max-sockets']) ?? 1024,
    out: v['out'] as string | undefined,
  }
}

type Options = ReturnType<typeof options>

/** `--tenants-multi WxG` (default 2x2; `none`: undefined). */
export function layoutFlag(v: unknown): { workers: number; gateways: number } | undefined {
  const text = String(v ?? '2x2').trim()
  if (text === 'none') {
    return undefined
  }
  const m = /^(\d+)x(\d+)$/.exec(text)
  const workers = Number(m?.[1])
  const gateways = Number(m?.[2])
  if (!m || !(workers >= 1 && workers <= 8) || !(gateways >= 1 && gateways <= 8)) {
    throw new CliError(`--tenants-multi: expected WxG with 1..8 workers and gateways (e.g. 2x2) or none, got "${text}"`)
  }
  return { workers, gateways }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))


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

/** Inference requests each worker has received (`$SRV.STATS` of its instance: `num_requests` summed over endpoints); NaN where unread. */
async function workerRequests(nc: NatsConnection, ids: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const id of ids) {
    try {
      const m = await nc.request(serviceSubject('STATS', SERVICE_NAME, id), new Uint8Array(0), { timeout: 2000 })
      const st = JSON.parse(new TextDecoder().decode(m.data)) as { endpoints?: { num_requests?: number }[] }
      out[id] = (st.endpoints ?? []).reduce((a, e) => a + (e.num_requests ?? 0), 0)
    } catch {
      out[id] = Number.NaN
    }
  }
  return out
}

/**
 * The two-tenant flood with `workers` worker and `gateways` gateway processes on one nats-server
 * (the same keys on every gateway, so a key is the same tenant everywhere): capacity = one wrk per
 * gateway at once, summed (median of 3); then tenant A at 3x and tenant B at 15 % of that, each
 * generator sending round robin over the gateways.
 */
async function runTenantsMulti(
  m: OverloadModel,
  o: Options,
  layout: { workers: number; gateways: number },
  dir: string,
  gens: [LoadGenerator, LoadGenerator],
  procs: Proc[],
  log: (s: string) => void,
): Promise<MultiTenantFlood | undefined> {
  const tag = `[${m.name} ${layoutLabel(layout)}]`
  let nc: NatsConnection | undefined
  try {
    log(`${tag} starting nats-server + ${layout.workers} workers + ${layout.gateways} gateways`)
    const nats = await startNats(dir)
    procs.push(nats.p)
    const ids = Array.from({ length: layout.workers }, (_, i) => `bench-w${i + 1}`)
    const workers = ids.map((id) => start(id, process.execPath, [COHORT_BIN, 'worker', '--nats', nats.url, '--id', id, ...m.workerArgs]))
    procs.push(...workers)
    await Promise.all(workers.map((w) => w.waitFor(/worker \S+ serving/, 120_000)))
    const keys = KEYS.flatMap((k) => ['--api-key', k])
    const gws = Array.from({ length: layout.gateways }, (_, i) =>
      start(`gateway${i + 1}`, process.execPath, [COHORT_BIN, 'gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--metrics-open', ...keys]),
    )
    procs.push(...gws)
    const bases = await Promise.all(gws.map(async (g) => (await g.waitFor(/gateway on (http:\/\/\S+) ->/, 120_000))[1]!))
    await Promise.all(bases.map((b) => waitReady(`${b}/v2/models/${m.name}`, KEYS[0])))
    nc = await connect({ servers: nats.url })
    const urls = bases.map((b) => b + m.path)
    const script = writeWrkScript(dir, `${m.name}-multi`, m.body, { Authorization: `Bearer ${KEYS[0]}` })
    const per = Math.max(1, Math.round(o.connections / layout.gateways))
    log(`${tag} capacity: ${layout.gateways} x wrk -c${per} at once, ${o.capacityWarmS} s warm-up, then the median of 3 x ${o.capacityS} s`)
    await Promise.all(urls.map((u) => runWrk(u, script, per, o.capacityWarmS, { allowNon2xx: true, timeoutS: 10 })))
    const caps: number[] = []
    for (let i = 0; i < 3; i++) {
      const rs = await Promise.all(urls.map((u) => runWrk(u, script, per, o.capacityS, { allowNon2xx: true, timeoutS: 10 })))
      caps.push(rs.reduce((a, r) => a + (r.requests - r.non2xx) / r.seconds, 0))
    }
    const C = [...caps].sort((a, b) => a - b)[1]!
    log(`${tag} capacity ${Math.round(C)} req/s (runs ${caps.map(Math.round).join(', ')})`)
    if (!(C > 0)) {
      throw new Error('capacity run got no 2xx answers')
    }
    const floodM = 3
    const quietM = 0.15
    const d = o.tenantDeadlineMs
    const sloMs = await serverSlo(nc, m.name)
    const step = (label: string, rate: number, key: string): LoadStep => ({
      url: urls[0]!,
      urls,
      body: m.body,
      headers: { authorization: `Bearer ${key}`, 'x-cohort-timeout-ms': String(d) },
      rate,
      durationS: o.tenantS,
      seed: seedOf(`${m.name} ${label} multi`),
      maxSockets: o.maxSockets,
      drainMs: d + 3000,
    })
    log(`${tag} two tenants: ${floodM}x and ${quietM * 100}% of capacity, ${d} ms deadlines, ${o.tenantS} s`)
    const pids: Record<string, number | undefined> = { nats: nats.p.proc.pid, gen: gens[0].pid, gen2: gens[1].pid }
    gws.forEach((g, i) => (pids[`gateway${i + 1}`] = g.proc.pid))
    workers.forEach((w, i) => (pids[`worker${i + 1}`] = w.proc.pid))
    const meter = cpuMeter(pids)
    const r0 = await workerRequests(nc, ids)
    const [fr, qr] = await Promise.all([gens[0].run(step('flood', floodM * C, KEYS[0])), gens[1].run(step('quiet', quietM * C, KEYS[1]))])
    const cpu = { ...meter(), gatewayMeanMs: Number.NaN }
    const r1 = await workerRequests(nc, ids)
    const spec = (label: string, multiple: number): StepSpec => ({ label, multiple, rate: multiple * C, clientDeadlineMs: d, sloMs, capacity: C })
    const result: MultiTenantFlood = {
      ...layout,
      capacity: C,
      capacityRuns: caps,
      perWorker: Object.fromEntries(ids.map((id) => [id, (r1[id] ?? Number.NaN) - (r0[id] ?? Number.NaN)])),
      flood: { ...summariseOverloadStep(spec(`tenant A ${floodM}x`, floodM), fr), ...cpu },
      quiet: { ...summariseOverloadStep(spec(`tenant B ${quietM * 100}%`, quietM), qr), ...cpu },
    }
    const sh = tenantShares(result)
    log(`${tag} quiet tenant: ${result.quiet.goodShare.toFixed(2)} of ${result.quiet.sent} within ${d} ms; shares of the good answers: flood ${sh.floodShare.toFixed(3)} (fair ${sh.floodFair.toFixed(3)}), quiet ${sh.quietShare.toFixed(3)} (fair ${sh.quietFair.toFixed(3)})`)
    return result
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0]! : String(e)
    log(`${tag} failed: ${msg}`)
    throw new Error(`${layoutLabel(layout)}: ${msg}`)
  } finally {
    await nc?.close().catch(() => undefined)
    await stopAll(procs)
    procs.length = 0
  }
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
    if (m.tenantsMulti) {
      out.push(`\nTwo tenants, ${layoutLabel({ workers: 1, gateways: 1 })} vs ${layoutLabel(m.tenantsMulti)} (each tenant's share of the good answers, 200s within the deadline, and its max-min fair share in brackets; ${m.describe}, so the workers are not CPU-bound)`)
      out.push(tenantShareTable(m))
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
      const r = await runModel(m, o, dir, gens, procs, log)
      if (m.sleepBased && o.tenantsMulti !== undefined && r.errors.length === 0) {
        try {
          r.tenantsMulti = await runTenantsMulti(m, o, o.tenantsMulti, dir, gens, procs, log)
        } catch (e) {
          r.errors.push(e instanceof Error ? e.message : String(e))
        }
      }
      models.push(r)
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
