import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { demoBinaryBody, demoBody, FLOOR_BODY } from './bodies.ts'
import { ensureDemoModel, ensureHeavyModel } from '@cohort/cli/demo-model'
import { runNodeLoad, sequential } from './client.ts'
import { hasWrk, runWrk, writeWrkBinaryScript, writeWrkScript, type SaturationResult } from './wrk.ts'
import { batchSizes, offlineBest, offlineCpuPerItemAt, offlineCurve, offlineItemsPerSecAt, type OfflinePoint } from './offline.ts'
import { pin } from './pin.ts'
import { printProfiles, summariseProfiles } from './profile.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { formatReport, type BenchResult, type ModeResult } from './report.ts'
import { batchSizeTotals, modelGauge, mainAndBusiest, processCpuSeconds, startStack, threadCpuSeconds, writeFloorModel, type Mode, type ServedStack } from './served.ts'
import { defineBenchCommand, type BenchCommand, type BenchScope, type BenchValues } from './skeleton.ts'

/** The worker's default batch limit for ONNX models (`DEFAULT_ONNX_BATCH_LIMIT` in apps/worker). */
const DEFAULT_LIMIT = 256

/** Help of `cohort bench`. */
export const BENCH_HELP = `usage: cohort bench [<benchmark>] [options]   (or npm run bench -- ...; docs/benchmarks.md)

Benchmarks (cohort bench <benchmark> --help for its flags):
  (none)         offline onnxruntime-node curve of the demo MLP vs the same model served over HTTP
  policies       batching policies under open-loop load
  overload       issue 27's overload targets (vegeta): shared, pinned and cohort serve layouts
  peers          Cohort beside Triton, Ray Serve, LitServe, BentoML
  pipeline DIR   single module vs fused pipeline vs remote stages
  tax            CPU per request of each process on the serving path (docs/benchmarks.md#serving-tax)
  latency        p50/p99 of a lone request (c=1) per path against the bare node:http floor, --base for before/after
  generate       continuous vs request-level batching vs none, generative test decoder (tokens/s, TTFT, TPOT)
  generate-layout  KV layouts of the test decoder: GQA slab vs concat export, ms per decode step
  threads        ORT intra-op threads and spinning, offline: items/s and CPU per item

Flags of the default benchmark:
  --ep cpu|webgpu|cuda   execution provider, offline and in the served worker (default cpu)
  --threads N            ORT intra-op threads, offline and in the served worker (default 1)
  --max-batch-size N     worker max batch (a hard cap); offline curve goes 1, 2, 4, ... up to it
                         (default: not passed, so the worker self-tunes its cap up to 256, and the
                         offline curve goes up to 256)
  --duration S           seconds of the wrk saturation run (default 10)
  --connections N        wrk connections (default 2 x the batch limit, 512 with the default 256:
                         a full batch can queue while the answers of the one before are in flight;
                         with 64, batches never passed 32 and served/offline read 0.49 for 0.66)
  --modes LIST           served modes, comma-separated: nats, embedded (default nats,embedded)
  --pin worker|ort       worker (nats mode only; embedded runs unpinned): the worker process alone on
                         the last core (taskset), the gateway, nats-server, wrk and this process on
                         the others. ort (both modes): only the model's ORT host thread (the model
                         process's busiest thread over the 2 s warm-up) alone on the last core
  --embedded             same as --modes embedded
  --offline-seconds S    timed seconds per offline batch size (default 1)
  --low-rate N           requests/s of the sequential low-load client (default 20)
  --low-seconds S        seconds of the low-load run (default 4)
  --floor-requests N     sequential requests to the Identity "floor" model (default 200)
  --binary               wrk saturation runs send the binary tensor data extension (as perf_analyzer
                         does) instead of OIP JSON
  --model demo|heavy     the MLP benchmarked (heavy: 512->2560x3->16, >= 0.5 ms per item; default demo)
  --out FILE             also write the results as JSON
  --profile              run the served processes under --cpu-prof and print top self times`

/** Profile printers, run after the report (--profile). */
const profiles: (() => void)[] = []

type Config = BenchResult['config'] & {
  ep: string
  out: string | undefined
  profile: boolean
  /** Which MLP is benchmarked (served under the name `demo`). */
  model: 'demo' | 'heavy'
  /** wrk sends binary tensor-extension bodies. */
  binary: boolean
  /** What runs alone on the last core: the worker process (nats mode), or the ORT host thread. */
  pin: 'worker' | 'ort' | undefined
}

/** Input features of each benchmarkable MLP. */
const FEATURES = { demo: 256, heavy: 512 } as const

const BENCH_OPTIONS = {
  threads: { type: 'string' },
  ep: { type: 'string' },
  'max-batch-size': { type: 'string' },
  duration: { type: 'string' },
  connections: { type: 'string' },
  modes: { type: 'string' },
  embedded: { type: 'boolean' },
  'offline-seconds': { type: 'string' },
  'low-rate': { type: 'string' },
  'low-seconds': { type: 'string' },
  'floor-requests': { type: 'string' },
  out: { type: 'string' },
  profile: { type: 'boolean' },
  model: { type: 'string' },
  binary: { type: 'boolean' },
  pin: { type: 'string' },
} satisfies BenchCommand['options']

function config(v: BenchValues): Config {
  const modes = v['embedded']
    ? ['embedded']
    : String(v['modes'] ?? 'nats,embedded')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
  for (const m of modes) {
    if (m !== 'nats' && m !== 'embedded') {
      throw new CliError(`--modes: unknown mode "${m}" (use nats, embedded)`)
    }
  }
  return {
    ep: String(v['ep'] ?? 'cpu'),
    threads: intFlag('threads', v['threads']) ?? 1,
    maxBatchSize: intFlag('max-batch-size', v['max-batch-size']) ?? DEFAULT_LIMIT,
    userMaxBatch: v['max-batch-size'] !== undefined,
    durationS: intFlag('duration', v['duration']) ?? 10,
    connections: intFlag('connections', v['connections']) ?? 2 * (intFlag('max-batch-size', v['max-batch-size']) ?? DEFAULT_LIMIT),
    modes: modes as Mode[],
    offlineSeconds: numFlag('offline-seconds', v['offline-seconds']) ?? 1,
    lowLoadRate: intFlag('low-rate', v['low-rate']) ?? 20,
    lowLoadSeconds: intFlag('low-seconds', v['low-seconds']) ?? 4,
    floorRequests: intFlag('floor-requests', v['floor-requests']) ?? 200,
    out: v['out'] as string | undefined,
    profile: Boolean(v['profile']),
    model: benchModel(v['model']),
    binary: Boolean(v['binary']),
    pin: pinFlag(v['pin']),
  }
}

function pinFlag(v: BenchValues[string]): 'worker' | 'ort' | undefined {
  if (v === undefined || v === 'worker' || v === 'ort') {
    return v
  }
  throw new CliError(`--pin takes worker or ort, got "${String(v)}"`)
}

function benchModel(v: BenchValues[string]): 'demo' | 'heavy' {
  if (v === undefined) {
    return 'demo'
  }
  if (v === 'demo' || v === 'heavy') {
    return v
  }
  throw new CliError(`--model must be demo or heavy, got "${String(v)}"`)
}

/**
 * A closed-loop run (wrk, else the Node client), under taskset when pinned. Past the server's SLO
 * a loop this deep gets 503s (admission): counted in `non2xx`, not in `requestsPerSec`.
 */
async function closedLoop(
  url: string,
  body: string,
  script: string | undefined,
  connections: number,
  s: number,
  pinned: { others: string } | undefined,
): Promise<SaturationResult> {
  const prefix = pinned ? ['taskset', '-c', pinned.others] : []
  const r = script ? await runWrk(url, script, connections, s, { prefix, allowNon2xx: true }) : await runNodeLoad(url, body, connections, s)
  return { ...r, requestsPerSec: (r.requests - r.non2xx) / r.seconds }
}

/**
 * One saturation run with its meters around it: the model's batches (from its metrics), and the CPU
 * seconds (/proc) of the model's process, of its main thread and busiest other thread, and of the
 * path's other processes, over the run's wall seconds.
 */
async function meterSaturation(stack: ServedStack, run: () => Promise<SaturationResult>) {
  const before = await batchSizeTotals(stack.metricsUrl, 'demo')
  const othersCpu = () => stack.otherPids.reduce((a, pid) => a + processCpuSeconds(pid), 0)
  const model0 = processCpuSeconds(stack.modelPid)
  const threads0 = threadCpuSeconds(stack.modelPid)
  const others0 = othersCpu()
  const t0 = performance.now()
  const saturation = await run()
  const model = processCpuSeconds(stack.modelPid) - model0
  const threads = mainAndBusiest(stack.modelPid, threads0, threadCpuSeconds(stack.modelPid))
  const others = othersCpu() - others0
  const wallS = (performance.now() - t0) / 1000
  const after = await batchSizeTotals(stack.metricsUrl, 'demo')
  const batches = after.count - before.count
  return {
    saturation,
    batches,
    meanBatch: batches > 0 ? (after.sum - before.sum) / batches : Number.NaN,
    items: after.sum - before.sum,
    batchCap: await modelGauge(stack.metricsUrl, 'cohort_batch_cap', 'demo'),
    cpu: { model, main: threads.main, busiest: threads.busiest, others, wallS },
  }
}

async function measureMode(
  mode: Mode,
  c: Config,
  o: { demoPath: string; floorPath: string; dir: string; offline: OfflinePoint[]; wrk: { demo: string; floor: string } | undefined; scope: BenchScope },
): Promise<ModeResult> {
  const profileDir = c.profile ? join(o.dir, `profile-${mode}`) : undefined
  const nodeFlags = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []
  console.error(`bench: [${mode}] starting ${mode === 'nats' ? 'nats-server + worker + gateway' : 'cohort serve'}...`)
  const maxBatchSize = c.userMaxBatch ? c.maxBatchSize : undefined
  const stack = await startStack({ mode, demoPath: o.demoPath, floorPath: o.floorPath, threads: c.threads, maxBatchSize, ep: c.ep, nodeFlags, track: o.scope.track })
  const demoUrl = `${stack.base}/v2/models/demo/infer`
  const floorUrl = `${stack.base}/v2/models/floor/infer`
  const body = demoBody(FEATURES[c.model])
  let pinned = c.pin === 'worker' && mode === 'nats' ? pinStack(stack, stack.modelPid) : undefined
  try {
    await sequential(demoUrl, body, { count: 50 })
    await sequential(floorUrl, FLOOR_BODY, { count: 50 })
    console.error(`bench: [${mode}] floor: ${c.floorRequests} sequential Identity requests`)
    const floor = await sequential(floorUrl, FLOOR_BODY, { count: c.floorRequests })
    // The same floor seen by wrk with one connection: no Node client in the measurement.
    const floorWrk = o.wrk ? await runWrk(floorUrl, o.wrk.floor, 1, 2) : undefined
    console.error(`bench: [${mode}] low load: ${c.lowLoadRate} req/s for ${c.lowLoadSeconds} s`)
    const lowLoad = await sequential(demoUrl, body, { rate: c.lowLoadRate, seconds: c.lowLoadSeconds })
    const loadPinned = (s: number, p: typeof pinned) => closedLoop(demoUrl, body, o.wrk?.demo, c.connections, s, p)
    console.error(`bench: [${mode}] saturation: 2 s warm-up, then ${c.durationS} s with ${c.connections} connections`)
    pinned = await warmUp(stack, mode, c.pin, pinned, loadPinned)
    const load = (s: number) => loadPinned(s, pinned)
    const { saturation, meanBatch, batches, batchCap, items, cpu } = await meterSaturation(stack, () => load(c.durationS))
    if (saturation.socketErrors > 0) {
      console.error(`bench: [${mode}] warning: ${saturation.socketErrors} socket errors during saturation`)
    }
    // t(1): median session.run at b=1, comparable with the served p50s.
    const t1Ms = o.offline.find((p) => p.batch === 1)?.p50Ms ?? Number.NaN
    const offlineAtMax = o.offline.find((p) => p.batch === c.maxBatchSize)?.itemsPerSec ?? Number.NaN
    const offlineAtMean = offlineItemsPerSecAt(o.offline, meanBatch)
    const best = offlineBest(o.offline)
    const cpuPerItemMs = items > 0 ? (cpu.model * 1000) / items : Number.NaN
    const offlineCpuAtMean = offlineCpuPerItemAt(o.offline, meanBatch)
    return {
      batchCap,
      offlineBest: best?.itemsPerSec ?? Number.NaN,
      offlineBestBatch: best?.batch ?? Number.NaN,
      ratioBest: saturation.requestsPerSec / (best?.itemsPerSec ?? Number.NaN),
      cpuPerItemMs,
      offlineCpuAtMean,
      cpuRatio: cpuPerItemMs / offlineCpuAtMean,
      modelCpuPerSec: cpu.model / cpu.wallS,
      modelThreadsCpuPerSec: { main: cpu.main / cpu.wallS, busiest: cpu.busiest / cpu.wallS },
      otherCpuPerItemMs: stack.otherPids.length > 0 && items > 0 ? (cpu.others * 1000) / items : Number.NaN,
      ...(pinned ? { pinned } : {}),
      mode,
      saturation,
      meanBatch,
      batches,
      offlineAtMax,
      offlineAtMean,
      ratioMax: saturation.requestsPerSec / offlineAtMax,
      ratioMean: saturation.requestsPerSec / offlineAtMean,
      lowLoad,
      floor,
      floorWrkP50Ms: floorWrk?.p50Ms ?? Number.NaN,
      t1Ms,
      ratioP50: lowLoad.p50Ms / (t1Ms + floor.p50Ms),
    }
  } finally {
    if (pinned) {
      // This process back on every core (the next mode runs unpinned).
      pin(process.pid, `0-${cpus().length - 1}`)
    }
    await stack.stop()
    o.scope.untrack(stack.stop)
    if (profileDir) {
      profiles.push(() => printProfiles(`CPU profile of the ${mode} processes (${profileDir}), top self time per thread:`, summariseProfiles(profileDir)))
    }
  }
}

/**
 * `--pin`: `alone` (the model's process, or one thread of it) on the last core; the stack's other
 * processes, the rest of the model's process (`rest`, when `alone` is a thread) and this one (its
 * clients; wrk is started under taskset) on the others.
 */
function pinStack(stack: ServedStack, alone: number | undefined, rest?: number): { model: string; others: string; thread?: true } {
  const n = cpus().length
  if (n < 2 || alone === undefined) {
    throw new CliError('--pin needs at least 2 cores and a model process')
  }
  const pinned = { model: String(n - 1), others: n === 2 ? '0' : `0-${n - 2}`, ...(rest !== undefined ? { thread: true as const } : {}) }
  for (const pid of [...stack.otherPids, process.pid, ...(rest !== undefined ? [rest] : [])]) {
    pin(pid, pinned.others)
  }
  // A thread alone: pinned after its process, which the loop moved whole.
  pin(alone, pinned.model, { thread: rest !== undefined })
  return pinned
}

/** The saturation warm-up (2 s); with `--pin ort`, then the ORT host thread pinned and 1 s more. The pinning in force after it. */
async function warmUp(
  stack: ServedStack,
  mode: Mode,
  pin: Config['pin'],
  pinned: ReturnType<typeof pinStack> | undefined,
  load: (s: number, p: ReturnType<typeof pinStack> | undefined) => Promise<unknown>,
): Promise<ReturnType<typeof pinStack> | undefined> {
  const warm0 = threadCpuSeconds(stack.modelPid)
  await load(2, pinned)
  if (pin !== 'ort') {
    return pinned
  }
  const ort = mainAndBusiest(stack.modelPid, warm0, threadCpuSeconds(stack.modelPid)).busiestTid
  const p = pinStack(stack, ort, stack.modelPid)
  console.error(`bench: [${mode}] thread ${ort} (the busiest over the warm-up) alone on cpu ${p.model}; 1 s more warm-up`)
  await load(1, p)
  return p
}

/**
 * `cohort bench`: the offline onnxruntime-node curve of the demo MLP, then the same model served
 * over HTTP (NATS and/or embedded) at saturation (wrk) and at low load, with the transport floor
 * measured on an Identity model. Prints a table; `--out` writes JSON. Every child process is
 * stopped on exit, on errors and on SIGINT/SIGTERM. `cohort bench policies ...` runs the batching
 * policy benchmark instead (policies.ts); `cohort bench load-worker` is its load-generator process.
 */
export async function benchCommand(args: string[]): Promise<void> {
  if (args[0] === 'policies') {
    const { benchPoliciesCommand } = await import('./policies.ts')
    return benchPoliciesCommand(args.slice(1))
  }
  if (args[0] === 'overload') {
    const { benchOverloadCommand } = await import('./overload.ts')
    return benchOverloadCommand(args.slice(1))
  }
  if (args[0] === 'peers') {
    const { benchPeersCommand } = await import('./peers.ts')
    return benchPeersCommand(args.slice(1))
  }
  if (args[0] === 'pipeline') {
    const { benchPipelineCommand } = await import('./pipeline.ts')
    return benchPipelineCommand(args.slice(1))
  }
  if (args[0] === 'tax') {
    const { benchTaxCommand } = await import('./tax.ts')
    return benchTaxCommand(args.slice(1))
  }
  if (args[0] === 'latency') {
    const { benchLatencyCommand } = await import('./latency.ts')
    return benchLatencyCommand(args.slice(1))
  }
  if (args[0] === 'tax-grpc-load') {
    const { grpcLoadMain } = await import('./tax-procs.ts')
    return grpcLoadMain(args.slice(1))
  }
  if (args[0] === 'tax-http-floor' || args[0] === 'tax-nats-responder' || args[0] === 'tax-nats-requester') {
    const t = await import('./tax-procs.ts')
    const a = args.slice(1)
    const natsUrl = a[0]
    if (args[0] === 'tax-http-floor') {
      return t.httpFloorMain()
    }
    if (natsUrl === undefined) {
      throw new CliError(`${args[0]} needs the NATS URL as its first argument`)
    }
    return args[0] === 'tax-nats-responder' ? t.natsResponderMain(natsUrl) : t.natsRequesterMain(natsUrl, Number(a[1]), Number(a[2]), Number(a[3]))
  }
  if (args[0] === 'generate') {
    const { benchGenerateCommand } = await import('./generate.ts')
    return benchGenerateCommand(args.slice(1))
  }
  if (args[0] === 'generate-layout') {
    const { benchGenerateLayoutCommand } = await import('./generate-layout.ts')
    return benchGenerateLayoutCommand(args.slice(1))
  }
  if (args[0] === 'threads') {
    const { benchThreadsCommand } = await import('./threads.ts')
    return benchThreadsCommand(args.slice(1))
  }
  if (args[0] === 'load-worker') {
    const { loadWorkerMain } = await import('./load-worker.ts')
    return loadWorkerMain()
  }
  return defaultBench(args)
}

/** The default benchmark (no subcommand): offline curve, then served modes. */
const defaultBench = defineBenchCommand({
  help: BENCH_HELP,
  options: BENCH_OPTIONS,
  run: async (v, _positionals, scope) => {
    const c = config(v)
    if (c.threads >= availableParallelism()) {
      console.error(`bench: warning: --threads ${c.threads} leaves no core for the load generator (${availableParallelism()} cores)`)
    }
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-'))
    scope.track(() => {
      if (!c.profile) {
        rmSync(dir, { recursive: true, force: true })
      }
      return Promise.resolve()
    })
    const { startedAt, load0: loadStart } = scope
    const demoPath = c.model === 'heavy' ? ensureHeavyModel() : ensureDemoModel()
    console.error(`bench: model ${c.model === 'heavy' ? 'heavy MLP 512->2560x3->16' : 'demo MLP 256->1024->1024->10'} (served as "demo")`)
    const floorPath = writeFloorModel(dir)
    const wrk = hasWrk()
    if (!wrk && c.modes.length > 0) {
      console.error('bench: warning: wrk is not installed; falling back to a Node load generator, which competes with the server for CPU')
    }
    const demoScript = c.binary ? writeWrkBinaryScript(dir, 'demo', demoBinaryBody(FEATURES[c.model])) : writeWrkScript(dir, 'demo', demoBody(FEATURES[c.model]))
    const wrkScripts = wrk ? { demo: demoScript, floor: writeWrkScript(dir, 'floor', FLOOR_BODY) } : undefined
    const batches = batchSizes(c.maxBatchSize)
    console.error(`bench: offline curve, batch sizes ${batches.join(', ')}, ${c.threads} thread(s)`)
    const offline = await offlineCurve({ path: demoPath, threads: c.threads, batches, seconds: c.offlineSeconds, ep: c.ep, features: FEATURES[c.model] })
    const served: ModeResult[] = []
    for (const mode of c.modes) {
      served.push(await measureMode(mode, c, { demoPath, floorPath, dir, offline, wrk: wrkScripts, scope }))
    }
    // The configuration as recorded: without --out and --profile (undefined keys stay out of the JSON).
    const cfg = { ...c, out: undefined, profile: undefined }
    const { out } = c
    const result: BenchResult = {
      startedAt,
      commit: gitCommit(),
      machine: machineInfo(loadStart),
      config: cfg,
      offline,
      served,
    }
    console.log(formatReport(result))
    profiles.splice(0).forEach((p) => p())
    if (out) {
      scope.writeJson(out, result)
    }
  },
})
