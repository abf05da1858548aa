import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { parsePrometheus } from '@cohort/metrics'
import { spawnCohort, startNatsServer, type CliProcess } from '@cohort/test-support'

/** How the gateway reaches the worker. */
export type Mode = 'nats' | 'embedded'

/** A running served stack. */
export interface ServedStack {
  mode: Mode
  /** Gateway base URL, e.g. `http://127.0.0.1:PORT`. */
  base: string
  /** A /metrics URL that carries the worker's `cohort_batch_size` histogram. */
  metricsUrl: string
  /** Stop every process of the stack (graceful, then SIGKILL). Idempotent. */
  stop: () => Promise<void>
  /** Process id of the process that runs the model: `cohort worker` (nats) or `cohort serve` (embedded). */
  modelPid: number | undefined
  /** Process ids of the other processes of the path (nats mode: the gateway and nats-server). */
  otherPids: number[]
}

/** Options of {@link startStack}. */
export interface StackOptions {
  mode: Mode
  demoPath: string
  floorPath: string
  threads: number
  /** `--max-batch-size` of the served model; absent: the worker's default (self-tuned cap up to 256). */
  maxBatchSize: number | undefined
  /** ONNX Runtime execution provider of the served model. @default cpu */
  ep?: string
  /** Node flags of the cohort processes (e.g. `--cpu-prof`). */
  nodeFlags?: string[]
  /** Called with a stop function as soon as each process exists, so Ctrl-C can reach it. */
  track: (stop: () => Promise<void>) => void
}

/**
 * Write the transport-floor model: one Identity node, `in` FP32 ['batch', 1] -> `out`.
 * Returns its path in `dir`.
 */
export function writeFloorModel(dir: string): string {
  const path = join(dir, 'floor.onnx')
  const bytes = model(
    graph({
      name: 'cohort_bench_floor',
      inputs: [valueInfo('in', 'FP32', ['batch', 1])],
      outputs: [valueInfo('out', 'FP32', ['batch', 1])],
      nodes: [node('Identity', ['in'], ['out'])],
    }),
  )
  writeFileSync(path, bytes)
  return path
}

function stopper(p: CliProcess): () => Promise<void> {
  let s: Promise<void> | undefined
  return () => (s ??= p.stop('SIGTERM', 5000).then(() => undefined))
}

/**
 * Start the served path: `nats` = nats-server + `cohort worker` + `cohort gateway` (three
 * processes), `embedded` = one `cohort serve` process (in-process transport). Both serve
 * `demo` and `floor` with the same threads and max batch size, and wait until `demo` answers.
 */
export async function startStack(o: StackOptions): Promise<ServedStack> {
  const models = ['--model', `demo=${o.demoPath}`, '--model', `floor=${o.floorPath}`]
  const tuning = ['--threads', String(o.threads), ...(o.maxBatchSize !== undefined ? ['--max-batch-size', String(o.maxBatchSize)] : []), '--ep', o.ep ?? 'cpu']
  const flags = o.nodeFlags ?? []
  const stops: (() => Promise<void>)[] = []
  const stopAll = async () => {
    // Gateway first, then worker, then NATS.
    for (const s of [...stops].reverse()) {
      await s().catch(() => undefined)
    }
  }
  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= stopAll())
  o.track(stop)
  try {
    let base: string
    let metricsUrl: string
    let modelPid: number | undefined
    const otherPids: number[] = []
    if (o.mode === 'embedded') {
      const serve = spawnCohort(['serve', '--port', '0', ...models, ...tuning], {}, flags)
      stops.push(stopper(serve))
      modelPid = serve.proc.pid
      const m = await serve.waitFor(/serving .* on (http:\/\/\S+) \(embedded\)/, 60_000)
      base = m[1] as string
      metricsUrl = `${base}/metrics`
    } else {
      const nats = await startNatsServer({ jetstream: false })
      stops.push(() => nats.stop())
      otherPids.push(...[nats.pid()].filter((x) => x !== undefined))
      const worker = spawnCohort(['worker', '--nats', nats.url, '--metrics-port', '0', ...models, ...tuning], {}, flags)
      stops.push(stopper(worker))
      modelPid = worker.proc.pid
      metricsUrl = (await worker.waitFor(/worker metrics on (http:\/\/\S+\/metrics)/, 60_000))[1] as string
      await worker.waitFor(/worker \S+ serving/, 60_000)
      const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0'], {}, flags)
      stops.push(stopper(gateway))
      otherPids.push(...[gateway.proc.pid].filter((x) => x !== undefined))
      base = (await gateway.waitFor(/gateway on (http:\/\/\S+) ->/, 60_000))[1] as string
    }
    await waitReady(`${base}/v2/models/demo`)
    return { mode: o.mode, base, metricsUrl, stop, modelPid, otherPids }
  } catch (e) {
    await stop()
    throw e
  }
}

/** Poll `url` until it answers 2xx (30 s at most). */
export async function waitReady(url: string): Promise<void> {
  const until = Date.now() + 30_000
  let last = ''
  while (Date.now() < until) {
    try {
      const r = await fetch(url)
      last = `HTTP ${r.status} ${await r.text()}`
      if (r.ok) {
        return
      }
    } catch (e) {
      last = String(e)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${url} did not become ready: ${last}`)
}

/** User + system seconds of a `/proc/.../stat` file; NaN where unreadable. */
function statCpuSeconds(file: string, ticksPerSecond: number): number {
  try {
    const stat = readFileSync(file, 'utf8')
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(rest[11]) + Number(rest[12])) / ticksPerSecond
  } catch {
    return Number.NaN
  }
}

/** CPU seconds (user + system, every thread) a process has used, from `/proc/<pid>/stat`; NaN where unreadable. */
export function processCpuSeconds(pid: number | undefined, ticksPerSecond = 100): number {
  return pid === undefined ? Number.NaN : statCpuSeconds(`/proc/${pid}/stat`, ticksPerSecond)
}

/** CPU seconds of each thread of a process by thread id (`/proc/<pid>/task`); empty where unreadable. */
export function threadCpuSeconds(pid: number | undefined, ticksPerSecond = 100): Map<number, number> {
  const out = new Map<number, number>()
  if (pid === undefined) {
    return out
  }
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      out.set(Number(tid), statCpuSeconds(`/proc/${pid}/task/${tid}/stat`, ticksPerSecond))
    }
  } catch {
    // The process is gone.
  }
  return out
}

/**
 * Of two {@link threadCpuSeconds} readings of process `pid`: its main thread's CPU seconds and
 * the busiest other thread's (the ORT host thread of a CPU model) between them, and that thread's id.
 */
export function mainAndBusiest(
  pid: number | undefined,
  before: Map<number, number>,
  after: Map<number, number>,
): { main: number; busiest: number; busiestTid: number | undefined } {
  let main = Number.NaN
  let busiest = 0
  let busiestTid: number | undefined
  for (const [tid, s] of after) {
    const d = s - (before.get(tid) ?? 0)
    if (tid === pid) {
      main = d
    } else if (busiestTid === undefined || d > busiest) {
      busiest = d
      busiestTid = tid
    }
  }
  return { main, busiest, busiestTid }
}

/** A gauge of one model (e.g. `cohort_batch_cap`) from a /metrics URL; NaN when absent. */
export async function modelGauge(metricsUrl: string, name: string, modelName: string): Promise<number> {
  const r = await fetch(metricsUrl)
  if (!r.ok) {
    return Number.NaN
  }
  for (const [k, v] of parsePrometheus(await r.text())) {
    if (k.startsWith(`${name}{`) && k.includes(`model="${modelName}"`)) {
      return v
    }
  }
  return Number.NaN
}

/** `cohort_batch_size` sum and count of one model, read from a /metrics URL. */
export async function batchSizeTotals(metricsUrl: string, modelName: string): Promise<{ sum: number; count: number }> {
  const r = await fetch(metricsUrl)
  if (!r.ok) {
    throw new Error(`GET ${metricsUrl}: HTTP ${r.status}`)
  }
  const m = parsePrometheus(await r.text())
  const label = `model="${modelName}"`
  let sum = 0
  let count = 0
  for (const [k, v] of m) {
    if (k.startsWith('cohort_batch_size_sum{') && k.includes(label)) {
      sum += v
    } else if (k.startsWith('cohort_batch_size_count{') && k.includes(label)) {
      count += v
    }
  }
  return { sum, count }
}
