import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { demoBinaryBody, demoBody, FLOOR_BODY } from './bodies.ts'
import { ensureDemoModel, ensureHeavyModel } from '@cohort/cli/demo-model'
import { runNodeLoad, sequential } from './client.ts'
import { hasWrk, runWrk, writeWrkBinaryScript, writeWrkScript } from './wrk.ts'
import { batchSizes, offlineBest, offlineCpuPerItemAt, offlineCurve, offlineItemsPerSecAt, type OfflinePoint } from './offline.ts'
import { printProfiles, summariseProfiles } from './profile.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { formatReport, type BenchResult, type ModeResult } from './report.ts'
import { batchSizeTotals, modelGauge, processCpuSeconds, startStack, writeFloorModel, type Mode } from './served.ts'
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
  --connections N        wrk connections (default 64)
  --modes LIST           served modes, comma-separated: nats, embedded (default nats,embedded)
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
    connections: intFlag('connections', v['connections']) ?? 64,
    modes: modes as Mode[],
    offlineSeconds: numFlag('offline-seconds', v['offline-seconds']) ?? 1,
    lowLoadRate: intFlag('low-rate', v['low-rate']) ?? 20,
    lowLoadSeconds: intFlag('low-seconds', v['low-seconds']) ?? 4,
    floorRequests: intFlag('floor-requests', v['floor-requests']) ?? 200,
    out: v['out'] as string | undefined,
    profile: Boolean(v['profile']),
    model: benchModel(v['model']),
    binary: Boolean(v['binary']),
  }
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

async function measureMode(
  mode: Mode,
  c: Config,
  o: { demoPath: string; floorPath: string; dir: string; offline: OfflinePoint[]; wrk: { demo: string; floor: string } | undefined; scope: BenchScope },
): Promise<ModeResult> {
  const profileDir = c.profile ? join(o.dir, `profile-${mode}`) : undefined
  const nodeFlags = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []
  console.error(`bench: [${mode}] starting ${mode === 'nats' ? 'nats-server + worker + gateway' : 'cohort serve'}...`)
  const stack = await startStack({
    mode,
    demoPath: o.demoPath,
    floorPath: o.floorPath,
    threads: c.threads,
    maxBatchSize: c.userMaxBatch ? c.maxBatchSize : undefined,
    ep: c.ep,
    nodeFlags,
    track: o.scope.track,
  })
  const demoUrl = `${stack.base}/v2/models/demo/infer`
  const floorUrl = `${stack.base}/v2/models/floor/infer`
  const body = demoBody(FEATURES[c.model])
  try {
    await sequential(demoUrl, body, { count: 50 })
    await sequential(floorUrl, FLOOR_BODY, { count: 50 })
    console.error(`bench: [${mode}] floor: ${c.floorRequests} sequential Identity requests`)
    const floor = await sequential(floorUrl, FLOOR_BODY, { count: c.floorRequests })
    // The same floor seen by wrk with one connection: no Node client in the measurement.
    const floorWrk = o.wrk ? await runWrk(floorUrl, o.wrk.floor, 1, 2) : undefined
    console.error(`bench: [${mode}] low load: ${c.lowLoadRate} req/s for ${c.lowLoadSeconds} s`)
    const lowLoad = await sequential(demoUrl, body, { rate: c.lowLoadRate, seconds: c.lowLoadSeconds })
    const load = (s: number) => (o.wrk ? runWrk(demoUrl, o.wrk.demo, c.connections, s) : runNodeLoad(demoUrl, body, c.connections, s))
    console.error(`bench: [${mode}] saturation: 2 s warm-up, then ${c.durationS} s with ${c.connections} connections`)
    await load(2)
    const before = await batchSizeTotals(stack.metricsUrl, 'demo')
    const cpu0 = processCpuSeconds(stack.modelPid)
    const saturation = await load(c.durationS)
    const cpu1 = processCpuSeconds(stack.modelPid)
    const after = await batchSizeTotals(stack.metricsUrl, 'demo')
    const batchCap = await modelGauge(stack.metricsUrl, 'cohort_batch_cap', 'demo')
    const batches = after.count - before.count
    const meanBatch = batches > 0 ? (after.sum - before.sum) / batches : Number.NaN
    if (saturation.socketErrors > 0) {
      console.error(`bench: [${mode}] warning: ${saturation.socketErrors} socket errors during saturation`)
    }
    // t(1): median session.run at b=1, comparable with the served p50s.
    const t1Ms = o.offline.find((p) => p.batch === 1)?.p50Ms ?? Number.NaN
    const offlineAtMax = o.offline.find((p) => p.batch === c.maxBatchSize)?.itemsPerSec ?? Number.NaN
    const offlineAtMean = offlineItemsPerSecAt(o.offline, meanBatch)
    const best = offlineBest(o.offline)
    const items = after.sum - before.sum
    const cpuPerItemMs = items > 0 ? ((cpu1 - cpu0) * 1000) / items : Number.NaN
    const offlineCpuAtMean = offlineCpuPerItemAt(o.offline, meanBatch)
    return {
      batchCap,
      offlineBest: best?.itemsPerSec ?? Number.NaN,
      offlineBestBatch: best?.batch ?? Number.NaN,
      ratioBest: saturation.requestsPerSec / (best?.itemsPerSec ?? Number.NaN),
      cpuPerItemMs,
      offlineCpuAtMean,
      cpuRatio: cpuPerItemMs / offlineCpuAtMean,
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
    await stack.stop()
    o.scope.untrack(stack.stop)
    if (profileDir) {
      profiles.push(() => printProfiles(`CPU profile of the ${mode} processes (${profileDir}), top self time per thread:`, summariseProfiles(profileDir)))
    }
  }
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
