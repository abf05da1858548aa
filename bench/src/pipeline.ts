import { existsSync } from 'node:fs'
import { availableParallelism, cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { PipelineExecutor, leafStages, type Pipeline, type StageRunner } from '@cohort/pipeline'
import { mulberry32 } from '@cohort/onnx-builder'
import { subjects as makeSubjects } from '@cohort/protocol'
import { validateItem } from '@cohort/predictor'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { RemoteStageRunner, loadConfig, localStageRunner, type LoadedConfig } from '@cohort/worker'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { connectNats } from '@cohort/cli/connect'
import { pin } from './pin.ts'
import { percentile } from './stats.ts'
import { defineBenchCommand, type BenchScope, type BenchValues } from './skeleton.ts'

/** Help of `cohort bench pipeline`. */
export const PIPELINE_BENCH_HELP = `cohort bench pipeline DIR [options]
Single-module vs fused pipeline vs remote stages for the first pipeline of DIR/cohort.config.ts, after
the reference method (docs/benchmarks.md, "Pipelines"): warm up with 100 batches of sizes drawn from
{1, 2, 4, ..., max}, then time each size. DIR/bench-inputs.ts default-exports (n) => n request inputs.
  --max-batch N          largest batch (a power of two; default 2048)
  --min-ms MS            time each point of each trial at least this long (default 200)
  --trials N             trials per batch size; ratios are the median over trials with their
                         min-max spread (default 3)
  --threads N            ORT intra-op threads of every ONNX stage (default 1)
  --inflight N           calls in flight for the throughput table (default 4)
  --pin LIST             remote: cores of each stage worker, ';'-separated taskset lists in stage order
                         (default: one core each, round-robin over the machine's cores)
  --modes LIST           single,fused,remote (default all three)`

type Mode = 'single' | 'fused' | 'remote'

/** A Markdown table (pasted into docs/benchmarks.md as is). */
function table(head: string[], rows: string[][]): string {
  return [head, head.map(() => '---:'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n')
}

/** One way of running a batch of validated inputs end to end. */
interface Runner {
  call(inputs: unknown[]): Promise<unknown[]>
  close(): Promise<void>
}

/** Single module: one function runs every stage over the whole batch in turn (no queues, no overlap). */
function singleModule(p: Pipeline, runners: Map<string, StageRunner>): Runner {
  const ctx = (stage: string, n: number) => ({
    pipeline: p.name,
    stage,
    batchSize: n,
    deadlines: new Array<number>(n).fill(Infinity),
    signal: new AbortController().signal,
  })
  const runnerOf = (stage: string): StageRunner => {
    const r = runners.get(stage)
    if (r === undefined) {
      throw new Error(`single module: no runner for stage ${stage}`)
    }
    return r
  }
  return {
    async call(inputs) {
      let items: unknown[] = inputs
      for (const s of p.stages) {
        if (s.kind === 'fanOut') {
          const parts = items.map((i) => s.split(i))
          const flat = parts.flat()
          const rs = await runnerOf(s.stage.name).run(flat, ctx(s.stage.name, flat.length))
          let at = 0
          const before = items
          items = parts.map((part, k) => s.merge(before[k], rs.slice(at, (at += part.length))))
        } else {
          items = await runnerOf(s.name).run(items, ctx(s.name, items.length))
        }
        if (items.some((x) => x instanceof Error)) {
          throw new Error(`single module: stage ${s.name} failed an item: ${String(items.find((x) => x instanceof Error))}`)
        }
      }
      return items
    },
    async close() {
      await Promise.all([...runners.values()].map((r) => r.close?.() ?? Promise.resolve()))
    },
  }
}

function executorRunner(ex: PipelineExecutor): Runner {
  return {
    async call(inputs) {
      const deadline = Date.now() + 60_000
      const out = await ex.runMany(inputs, deadline)
      const bad = out.find((x) => x instanceof Error)
      if (bad) {
        throw new Error(`pipeline failed an item: ${String(bad)}`)
      }
      return out
    },
    close: () => ex.close(),
  }
}

/**
 * Median per-call ms of `b`-item calls, one at a time, per mode. The modes take turns, in an order
 * reversed every round (so a load change on a shared machine hits them alike), for at least
 * `minMs` per mode. Each turn is two calls and only the second is timed: a timed call always
 * follows a call of its own mode. (Timing every call made a fused call follow a remote one in
 * every other round, after 2-3 ms with the local ORT thread asleep and its caches cold, and never
 * a single call: fused/single read 2.41 at batch 1 with all three modes, 1.04 with two.)
 */
async function perCall(rs: Map<Mode, Runner>, inputs: unknown[], minMs: number): Promise<Map<Mode, number>> {
  const t0 = performance.now()
  const order = [...rs].map(([m, r]) => {
    const ts: number[] = []
    return { m, r, ts }
  })
  const reversed = [...order].reverse()
  for (let round = 0; round < 4 || performance.now() - t0 < minMs * rs.size; round++) {
    for (const { r, ts } of round % 2 === 0 ? order : reversed) {
      await r.call(inputs)
      const s = performance.now()
      await r.call(inputs)
      ts.push(performance.now() - s)
    }
  }
  return new Map(order.map(({ m, ts }) => [m, percentile(ts, 50)]))
}

/** Items/s with `inflight` calls of `b` items in flight, for at least `minMs`. */
async function throughput(r: Runner, inputs: unknown[], minMs: number, inflight: number, serial: boolean): Promise<number> {
  let items = 0
  const t0 = performance.now()
  let lock: Promise<unknown> = Promise.resolve()
  const loop = async () => {
    while (performance.now() - t0 < minMs) {
      if (serial) {
        // A single module serves one call at a time (one model instance, one function).
        const run = lock.then(() => r.call(inputs))
        lock = run.catch(() => undefined)
        await run
      } else {
        await r.call(inputs)
      }
      items += inputs.length
    }
  }
  await Promise.all(Array.from({ length: inflight }, loop))
  return items / ((performance.now() - t0) / 1000)
}

/** `cohort bench pipeline DIR`. */
export const benchPipelineCommand = defineBenchCommand({
  help: PIPELINE_BENCH_HELP,
  options: {
    'max-batch': { type: 'string' },
    'min-ms': { type: 'string' },
    trials: { type: 'string' },
    threads: { type: 'string' },
    inflight: { type: 'string' },
    pin: { type: 'string' },
    modes: { type: 'string' },
  },
  positionals: true,
  needsHelp: (positionals) => positionals.length !== 1,
  run: async (v, positionals, { track }) => {
    const o = pipelineOptions(v, positionals)
    let loaded: LoadedConfig
    try {
      loaded = await loadConfig(o.dir)
    } catch (e) {
      throw new CliError(e instanceof Error ? e.message : String(e))
    }
    const p = loaded.config.models[0]
    if (p === undefined) {
      throw new CliError(`${o.dir}: the configuration has no pipeline`)
    }
    const inputsFile = join(loaded.dir, 'bench-inputs.ts')
    if (!existsSync(inputsFile)) {
      throw new CliError(`${inputsFile} is missing: it must default-export (n) => n request inputs`)
    }
    const make = ((await import(pathToFileURL(inputsFile).href)) as { default: (n: number) => unknown[] }).default
    const all = make(o.maxBatch).map((x, i) => validateItem(p.input, x, i))
    const sizes: number[] = []
    for (let b = 1; b <= o.maxBatch; b *= 2) {
      sizes.push(b)
    }
    const runners = await startRunners(p, loaded, o, track)
    for (const r of runners.values()) {
      track(() => r.close())
    }
    await checkAndWarm(runners, all, sizes, o.maxBatch)
    const { lat, thr } = await measureModes(runners, all, sizes, o)
    printTables(p, o, sizes, [...runners.keys()], lat, thr)
  },
})

type PipelineBenchOptions = ReturnType<typeof pipelineOptions>

/** The flags of `cohort bench pipeline`, checked. */
function pipelineOptions(v: BenchValues, positionals: string[]) {
  const dir = positionals[0]
  if (dir === undefined) {
    throw new CliError('cohort bench pipeline needs DIR')
  }
  const maxBatch = intFlag('max-batch', v['max-batch']) ?? 2048
  if ((maxBatch & (maxBatch - 1)) !== 0) {
    throw new CliError('--max-batch must be a power of two')
  }
  const minMs = numFlag('min-ms', v['min-ms']) ?? 200
  const trials = intFlag('trials', v['trials']) ?? 3
  if (trials < 1) {
    throw new CliError('--trials must be >= 1')
  }
  const threads = intFlag('threads', v['threads']) ?? 1
  const inflight = intFlag('inflight', v['inflight']) ?? 4
  const modes = ((v['modes'] as string | undefined) ?? 'single,fused,remote').split(',') as Mode[]
  if (modes.some((m) => !['single', 'fused', 'remote'].includes(m))) {
    throw new CliError('--modes takes single, fused, remote')
  }
  const pin = typeof v['pin'] === 'string' ? v['pin'] : undefined
  return { dir, maxBatch, minMs, trials, threads, inflight, modes, pin }
}

/** The runner of each mode asked for, started (remote: nats-server and one stage worker per stage). */
async function startRunners(p: Pipeline, loaded: LoadedConfig, o: PipelineBenchOptions, track: BenchScope['track']): Promise<Map<Mode, Runner>> {
  const onnx = { ep: 'cpu' as const, instances: 1, intraOpNumThreads: o.threads }
  const opts = { loaded, onnx }
  // Every stage takes a whole call as one batch, as the single module does.
  // Room for every call in flight (the throughput table), in the stage queues and on stage workers.
  const maxQueue = 2 * o.inflight * o.maxBatch
  const batching = { maxBatchSize: o.maxBatch, maxDelayMs: 0, maxQueue }
  // Stopped in reverse order of start (the skeleton's cleanups): runners, then the bench's NATS
  // connection, then stage workers, then nats-server (closing a connection after its server is
  // gone kept the process alive).
  const runners = new Map<Mode, Runner>()
  if (o.modes.includes('single')) {
    const rs = new Map(leafStages(p).map((s) => [s.name, localStageRunner(p, s, opts)] as const))
    await Promise.all([...rs.values()].map((r) => r.start?.() ?? Promise.resolve()))
    runners.set('single', singleModule(p, rs))
  }
  if (o.modes.includes('fused')) {
    const ex = new PipelineExecutor({ pipeline: p, batching, runnerFor: (s) => localStageRunner(p, s, opts) })
    await ex.start()
    runners.set('fused', executorRunner(ex))
  }
  if (o.modes.includes('remote')) {
    runners.set('remote', await startRemote(p, loaded, o, maxQueue, batching, track))
  }
  return runners
}

/** Remote mode: nats-server, one pinned stage worker per leaf stage, and an executor over NATS. */
async function startRemote(
  p: Pipeline,
  loaded: LoadedConfig,
  o: PipelineBenchOptions,
  maxQueue: number,
  batching: { maxBatchSize: number; maxDelayMs: number; maxQueue: number },
  track: BenchScope['track'],
): Promise<Runner> {
  const nats: NatsServerHandle = await startNatsServer({ jetstream: false })
  track(() => nats.stop())
  const cores = availableParallelism()
  const stages = leafStages(p)
  const pins = o.pin !== undefined ? o.pin.split(';') : stages.map((_, i) => String(i % cores))
  const pinOf = (i: number): string => {
    const cpu = pins[i % pins.length]
    if (cpu === undefined) {
      throw new CliError('--pin needs a CPU list per stage')
    }
    return cpu
  }
  const procs: CliProcess[] = stages.map((s, i) => {
    const w = spawnCohort([
      'worker',
      loaded.dir,
      '--nats',
      nats.url,
      '--stage',
      s.name,
      '--threads',
      String(o.threads),
      '--max-batch-size',
      String(o.maxBatch),
      '--max-delay-ms',
      '0',
      '--max-queue',
      String(maxQueue),
      '--no-admission',
    ])
    // Pin every thread of the stage worker (threads made later inherit the mask).
    pin(w.proc.pid, pinOf(i))
    return w
  })
  track(() => Promise.all(procs.map((w) => w.stop('SIGKILL'))))
  await Promise.all(procs.map((w) => w.waitFor(/serving/, 120_000)))
  const nc = await connectNats(nats.url, 'cohort-bench-pipeline')
  const transport: Transport = createNatsTransport(nc, { ownsConnection: true })
  track(() => transport.close())
  const subjects = makeSubjects()
  const ex = new PipelineExecutor({
    pipeline: p,
    batching,
    runnerFor: (s) => new RemoteStageRunner({ transport, subjects, pipeline: p.name, stage: s.name }),
  })
  console.error(`bench: remote stages ${stages.map((s, i) => `${s.name}@cpu${pinOf(i)}`).join(', ')}`)
  return executorRunner(ex)
}

/** Same outputs in every mode; then 100 warm-up calls per mode of sizes drawn from `sizes`. */
async function checkAndWarm(runners: Map<Mode, Runner>, all: unknown[], sizes: number[], maxBatch: number): Promise<void> {
  const sample = all.slice(0, Math.min(64, maxBatch))
  const outs = await Promise.all([...runners].map(async ([m, r]) => [m, JSON.stringify(await r.call(sample))] as const))
  const first = outs[0]
  for (const [m, o] of outs) {
    if (first !== undefined && o !== first[1]) {
      throw new Error(`bench: ${m} outputs differ from ${first[0]}`)
    }
  }
  const rand = mulberry32(7)
  for (const [m, r] of runners) {
    const t0 = performance.now()
    for (let i = 0; i < 100; i++) {
      await r.call(all.slice(0, sizes[Math.floor(rand() * sizes.length)]))
    }
    console.error(`bench: [${m}] warm-up: 100 batches in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  }
}

/**
 * Per batch size, `trials` trials; in each, the per-call modes take turns call by call and the
 * throughput runs alternate their order trial by trial. A ratio is taken within a trial (both
 * sides measured under the same load), then summarised over trials: median [min-max].
 * Per `mode:batch`, the per-call ms and the items/s of each trial.
 */
async function measureModes(runners: Map<Mode, Runner>, all: unknown[], sizes: number[], o: PipelineBenchOptions) {
  const lat = new Map<string, number[]>()
  const thr = new Map<string, number[]>()
  const add = (m: Map<string, number[]>, k: string, x: number) => {
    const xs = m.get(k)
    if (xs) {
      xs.push(x)
    } else {
      m.set(k, [x])
    }
  }
  const order = [...runners]
  for (const b of sizes) {
    const inputs = all.slice(0, b)
    for (let t = 0; t < o.trials; t++) {
      // Each mode takes turns with single alone, a pair at a time: a remote call (2-10 ms, two
      // other processes woken) changed the timing of the in-process call after it.
      // The first pair's single is the table's single column; each ratio uses its own pair's.
      const single = runners.get('single')
      const others = order.filter(([m]) => m !== 'single')
      const pairs = others.length === 0 ? [order] : others.map((e) => (single ? [['single', single] as const, e] : [e]))
      for (const [k, pair] of pairs.entries()) {
        const other = pair[pair.length - 1]?.[0]
        for (const [pm, ms] of await perCall(new Map(pair), inputs, o.minMs)) {
          if (pm !== 'single') {
            add(lat, `${pm}:${b}`, ms)
            continue
          }
          if (k === 0) {
            add(lat, `single:${b}`, ms)
          }
          add(lat, `single/${other}:${b}`, ms)
        }
      }
      for (const [m, r] of t % 2 === 0 ? order : [...order].reverse()) {
        add(thr, `${m}:${b}`, await throughput(r, inputs, o.minMs, o.inflight, m === 'single'))
      }
    }
    console.error(`bench: b=${b} done`)
  }
  return { lat, thr }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n % 2 === 1 ? (s[(n - 1) / 2] ?? Number.NaN) : ((s[n / 2 - 1] ?? Number.NaN) + (s[n / 2] ?? Number.NaN)) / 2
}

/** The two Markdown tables (per call, throughput) with each mode's ratio to single. */
function printTables(p: Pipeline, o: PipelineBenchOptions, sizes: number[], ms: Mode[], lat: Map<string, number[]>, thr: Map<string, number[]>): void {
  const others = ms.filter((m) => m !== 'single')
  /** Median over trials of the per-trial ratio mode / single, with its min-max spread. */
  const ratio = (m: Map<string, number[]>, mode: Mode, b: number) => {
    const a = m.get(`${mode}:${b}`)
    const base = m.get(`single/${mode}:${b}`) ?? m.get(`single:${b}`)
    if (!a || !base) {
      return '-'
    }
    const rs = a.map((x, i) => x / (base[i] ?? Number.NaN))
    return o.trials === 1 ? (rs[0] ?? Number.NaN).toFixed(2) : `${median(rs).toFixed(2)} [${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)}]`
  }
  const fmtUs = (xs: number[] | undefined) => (xs === undefined ? '-' : (median(xs) * 1000).toFixed(1))
  const latRows = sizes.map((b) => [String(b), ...ms.map((m) => fmtUs(lat.get(`${m}:${b}`))), ...others.map((m) => ratio(lat, m, b))])
  const thrRows = sizes.map((b) => [String(b), ...ms.map((m) => Math.round(median(thr.get(`${m}:${b}`) ?? [0])).toString()), ...others.map((m) => ratio(thr, m, b))])
  console.log(
    `\npipeline ${p.name} (${o.dir}): ${p.stages.map((s) => s.name).join(' -> ')}; ${cpus().length} cores, load ${(loadavg()[0] ?? Number.NaN).toFixed(1)}; ORT threads ${o.threads}; ${o.trials} trials of >= ${o.minMs} ms per point`,
  )
  console.log(
    `\nPer call, one call at a time, modes taking turns (µs, median over trials of each trial's median; ratio = mode / single per trial, median [min-max] over trials):\n`,
  )
  console.log(table(['batch', ...ms.map((m) => `${m} µs`), ...others.map((m) => `${m}/single`)], latRows))
  console.log(`\nThroughput, ${o.inflight} calls in flight (items/s, median over trials; single serves one call at a time; ratio = mode / single per trial, median [min-max]):\n`)
  console.log(table(['batch', ...ms.map((m) => `${m} items/s`), ...others.map((m) => `${m}/single`)], thrRows))
}
