/**
 * `cohort bench generate`: continuous (iteration-level) batching vs request-level batching vs
 * none, side by side in one run, on the test decoder through `createOnnxGenerator` (engine level:
 * the worker thread and its messages, no HTTP or NATS). Poisson arrivals; prompt and output lengths
 * drawn long-tailed (log-uniform, skewed short). Prints tokens/s, TTFT and TPOT p50/p99, mean
 * running batch per mode and rate, then issue 18's targets with met/missed (docs/generative.md#benchmark).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { buildDecoder, mulberry32, TINY_DECODER } from '@cohort/onnx-builder'
import type { EngineMetrics } from '@cohort/generative'
import { createOnnxGenerator, type OnnxGenerator, type OnnxGeneratorOptions } from '@cohort/worker/generative'
import { table } from './report.ts'
import { percentile } from './stats.ts'
import { defineBenchCommand, type BenchValues } from './skeleton.ts'

export const GENERATE_HELP = `cohort bench generate [options]
Continuous batching vs request-level batching vs none on the test decoder (byte vocabulary,
width 64, 2 layers, GQA slab), in-process through the worker-thread generator (no HTTP).
  --requests N       requests per run (default 48)
  --rates LIST       Poisson arrival rates, requests/s, ascending (default 4,8,16,32,64)
  --prompt MIN-MAX   prompt lengths in tokens (default 16-512 scaled by --scale)
  --output MIN-MAX   output lengths in tokens (default 8-512 scaled by --scale)
  --scale F          length scale for CPU (default 0.25: prompts 16-128, outputs 8-128)
  --max-sequences N  running sequences of the batching modes (default 16)
  --step-tokens N    the engine's maxStepTokens: decode rows + prefill tokens per step (default 256)
  --seed N           workload seed (default 1)
  --threads N        ORT intra-op threads (default 1)
  --overhead-only    only the serving-overhead measurement (16 running sequences, greedy), --repeats times
  --repeats N        runs of --overhead-only (default 3)`

type Mode = 'continuous' | 'request' | 'none'
const MODES: Mode[] = ['continuous', 'request', 'none']

interface Req {
  at: number
  prompt: number[]
  maxTokens: number
}

interface RunResult {
  mode: Mode
  rate: number
  tokensPerS: number
  ttft: number[]
  /** TTFT by request index (NaN when it got no token). */
  ttftAt: number[]
  tpot: number[]
  meanBatch: number
  overhead: number
  errors: number
}

function range(name: string, v: BenchValues[string], dflt: [number, number], scale: number): [number, number] {
  if (v === undefined) return [dflt[0], Math.max(dflt[0], Math.round(dflt[1] * scale))]
  const m = /^(\d+)-(\d+)$/.exec(String(v))
  if (!m || Number(m[1]) < 1 || Number(m[2]) < Number(m[1])) throw new CliError(`--${name} must be MIN-MAX, got "${String(v)}"`)
  return [Number(m[1]), Number(m[2])]
}

/** Long-tailed length in [lo, hi]: log-uniform of u^2 (most short, a few long). */
function longTail(u: number, lo: number, hi: number): number {
  return Math.round(lo * Math.pow(hi / lo, u * u))
}

function workload(n: number, rate: number, p: [number, number], o: [number, number], seed: number): Req[] {
  const r = mulberry32(seed)
  let t = 0
  return Array.from({ length: n }, () => {
    t += -Math.log(1 - r()) / rate
    const len = longTail(r(), p[0], p[1])
    return { at: t * 1000, prompt: Array.from({ length: len }, () => Math.floor(r() * 256)), maxTokens: longTail(r(), o[0], o[1]) }
  })
}

interface Timing {
  submit: number
  first?: number
  last?: number
  tokens: number
  done: boolean
  error?: string
}

/** Runs `reqs` open-loop against `g`; resolves when every one has ended. */
async function drive(g: OnnxGenerator, reqs: Req[]): Promise<{ timings: Timing[]; wallMs: number }> {
  const timings: Timing[] = reqs.map(() => ({ submit: 0, tokens: 0, done: false }))
  const t0 = performance.now()
  let left = reqs.length
  let finish!: () => void
  const all = new Promise<void>((r) => (finish = r))
  const end = (i: number, err?: string): void => {
    const t = timings[i] as Timing
    t.done = true
    if (err) t.error = err
    if (--left === 0) finish()
  }
  reqs.forEach((q, i) => {
    setTimeout(
      () => {
        const t = timings[i] as Timing
        t.submit = performance.now()
        g.submit({ prompt: q.prompt, params: { maxTokens: q.maxTokens, temperature: 0, ignoreEos: true }, stream: true }, Date.now() + 600_000, {
          delta: (d) => {
            const now = performance.now()
            t.first ??= now
            t.last = now
            t.tokens += d.tokens.length
          },
          done: () => end(i),
          error: (e) => end(i, e.code),
        })
      },
      Math.max(0, q.at - (performance.now() - t0)),
    )
  })
  await all
  return { timings, wallMs: performance.now() - t0 }
}

function opts(mode: Mode, maxSequences: number, threads: number, maxStepTokens = 256): OnnxGeneratorOptions {
  const base = { tokenizer: 'bytes' as const, intraOpNumThreads: threads, maxStepTokens }
  if (mode === 'none') return { ...base, maxSequences: 1 }
  return { ...base, maxSequences, batching: mode === 'request' ? 'request' : 'continuous' }
}

interface Overhead {
  /** (step - session.run) / step over the measured steps. */
  ratio: number
  batch: number
  steps: number
  stepMs: number
  runMs: number
  /** Process CPU (every thread: main, generation thread, ORT) per step, ms. */
  cpuMs: number
  /** Caller's wall time of the measured generations per step, ms: steps plus what the thread does between them (its message per step). */
  wallMs: number
}

/** Serving overhead at 16 running sequences, greedy: everything in a step but session.run (a warm-up first). */
async function measureOverhead(path: string, threads: number, stepTokens: number): Promise<Overhead> {
  const g = await createOnnxGenerator(path, opts('continuous', 16, threads, stepTokens))
  await drive(
    g,
    Array.from({ length: 16 }, (_, i) => ({ at: 0, prompt: [i + 1, 2, 3, 4, 5, 6, 7, 8], maxTokens: 2 })),
  )
  const before = { ...g.metrics() }
  const cpu0 = process.cpuUsage()
  const { wallMs } = await drive(
    g,
    Array.from({ length: 16 }, (_, i) => ({ at: 0, prompt: Array.from({ length: 32 }, (_, j) => (i * 7 + j) % 256), maxTokens: 200 })),
  )
  const cpu = process.cpuUsage(cpu0)
  const after = g.metrics()
  await g.close()
  const stepMs = after.stepMsSum - before.stepMsSum
  const runMs = after.runMsSum - before.runMsSum
  const steps = after.steps - before.steps
  return {
    ratio: (stepMs - runMs) / stepMs,
    batch: (after.decodeRowsSum - before.decodeRowsSum) / (after.decodeSteps - before.decodeSteps),
    steps,
    stepMs: stepMs / steps,
    runMs: runMs / steps,
    cpuMs: (cpu.user + cpu.system) / 1000 / steps,
    wallMs: wallMs / steps,
  }
}

function fmt(x: number, d = 1): string {
  return Number.isFinite(x) ? x.toFixed(d) : '-'
}

export const benchGenerateCommand = defineBenchCommand({
  help: GENERATE_HELP,
  options: {
    requests: { type: 'string' },
    rates: { type: 'string' },
    prompt: { type: 'string' },
    output: { type: 'string' },
    scale: { type: 'string' },
    'max-sequences': { type: 'string' },
    'step-tokens': { type: 'string' },
    seed: { type: 'string' },
    threads: { type: 'string' },
    'overhead-only': { type: 'boolean' },
    repeats: { type: 'string' },
  },
  run: async (v) => {
    const n = intFlag('requests', v['requests']) ?? 48
    const rates = String(v['rates'] ?? '4,8,16,32,64')
      .split(',')
      .map(Number)
    if (rates.some((r) => !(r > 0))) throw new CliError('--rates must be positive numbers')
    const scale = numFlag('scale', v['scale']) ?? 0.25
    const pr = range('prompt', v['prompt'], [16, 512], scale)
    const or = range('output', v['output'], [8, 512], scale)
    const maxSeqs = intFlag('max-sequences', v['max-sequences']) ?? 16
    const seed = intFlag('seed', v['seed']) ?? 1
    const threads = intFlag('threads', v['threads']) ?? 1
    const stepTokens = intFlag('step-tokens', v['step-tokens']) ?? 256
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-gen-'))
    const path = join(dir, 'tiny.onnx')
    writeFileSync(path, buildDecoder(TINY_DECODER))
    const g: GenRun = { n, rates, scale, pr, or, maxSeqs, seed, threads, stepTokens, path }
    try {
      if (v['overhead-only'] === true) {
        const repeats = intFlag('repeats', v['repeats']) ?? 3
        await overheadOnly(g, repeats)
        return
      }
      // Baselines, measured in this run: each prompt of the workload alone (prefill time, incl.
      // the thread hand-off floor) and one decode step at batch 1.
      const { prefill, meanPrefill, decode1, ttftSlo, tpotSlo } = await baselines(g)

      const results = await runModes(g)

      // Serving overhead at 16 running sequences, greedy: everything in a step but session.run.
      const o16 = await measureOverhead(path, threads, stepTokens)

      printReport(g, { meanPrefill, decode1, ttftSlo, tpotSlo, prefill }, results, o16)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  },
})

/** One `cohort bench generate` run: its flags and the test decoder's path. */
interface GenRun {
  n: number
  rates: number[]
  scale: number
  pr: [number, number]
  or: [number, number]
  maxSeqs: number
  seed: number
  threads: number
  stepTokens: number
  path: string
}

/** `--overhead-only`: the serving overhead at 16 running sequences, `repeats` times, as a table. */
async function overheadOnly(g: GenRun, repeats: number): Promise<void> {
  const { path, threads, stepTokens } = g
  const rows: Overhead[] = []
  for (let i = 0; i < repeats; i++) rows.push(await measureOverhead(path, threads, stepTokens))
  console.log(
    `cohort bench generate --overhead-only: test decoder, 16 running sequences x 200 tokens (prompts of 32), greedy; ${threads} ORT thread(s), ${availableParallelism()} cores; means per step (overhead = (step - session.run) / step inside the engine's step; wall = the caller's time of the generations / steps, which also counts the thread's message per step)`,
  )
  console.log(
    table(
      ['run', 'steps', 'step ms', 'session.run ms', 'rest ms', 'overhead', 'wall ms', '1 - run/wall', 'process CPU ms', 'mean batch'],
      rows.map((o, i) => [
        String(i + 1),
        String(o.steps),
        fmt(o.stepMs, 3),
        fmt(o.runMs, 3),
        fmt(o.stepMs - o.runMs, 3),
        `${fmt(o.ratio * 100, 1)}%`,
        fmt(o.wallMs, 3),
        `${fmt((1 - o.runMs / o.wallMs) * 100, 1)}%`,
        fmt(o.cpuMs, 3),
        fmt(o.batch, 1),
      ]),
    ),
  )
  const med = percentile(
    rows.map((o) => o.ratio),
    50,
  )
  console.log(`serving overhead <= 10% of step at 16 running, greedy: median ${fmt(med * 100, 1)}% over ${repeats} runs: ${med <= 0.1 ? 'met' : 'missed'}`)
}

/**
 * Baselines, measured in this run: each prompt of the workload alone (prefill time, incl. the
 * thread hand-off floor) and one decode step at batch 1; the SLOs from them.
 */
async function baselines(g: GenRun) {
  const { n, pr, or, seed, path, threads } = g
  const calib = workload(Math.min(n, 16), 1, pr, or, seed)
  const alone = await createOnnxGenerator(path, opts('none', 1, threads))
  const prefill: number[] = []
  const step1: number[] = []
  for (const q of calib) {
    const { timings } = await drive(alone, [{ ...q, at: 0, maxTokens: Math.max(q.maxTokens, 8) }])
    const t = timings[0] as Timing
    prefill.push((t.first as number) - t.submit)
    step1.push(((t.last as number) - (t.first as number)) / Math.max(1, t.tokens - 1))
  }
  await alone.close()
  const meanPrefill = prefill.reduce((a, b) => a + b, 0) / prefill.length
  const decode1 = percentile(step1, 50)
  const ttftSlo = 5 * meanPrefill
  const tpotSlo = 3 * decode1
  return { prefill, meanPrefill, decode1, ttftSlo, tpotSlo }
}

/** Every mode at every rate: tokens/s, TTFT, TPOT, mean batch and overhead. */
async function runModes(g: GenRun): Promise<RunResult[]> {
  const { n, rates, pr, or, seed, path, maxSeqs, threads, stepTokens } = g
  const results: RunResult[] = []
  for (const rate of rates) {
    const reqs = workload(n, rate, pr, or, seed)
    for (const mode of MODES) {
      const g = await createOnnxGenerator(path, opts(mode, maxSeqs, threads, stepTokens))
      const { timings, wallMs } = await drive(g, reqs)
      const m: EngineMetrics = g.metrics()
      await g.close()
      const ok = timings.filter((t) => !t.error && t.first !== undefined)
      const r: RunResult = {
        mode,
        rate,
        tokensPerS: ok.reduce((a, t) => a + t.tokens, 0) / (wallMs / 1000),
        ttft: ok.map((t) => (t.first as number) - t.submit),
        ttftAt: timings.map((t) => (t.first === undefined || t.error ? Number.NaN : t.first - t.submit)),
        tpot: ok.filter((t) => t.tokens > 1).map((t) => ((t.last as number) - (t.first as number)) / (t.tokens - 1)),
        meanBatch: m.decodeSteps > 0 ? m.decodeRowsSum / m.decodeSteps : 0,
        overhead: m.stepMsSum > 0 ? (m.stepMsSum - m.runMsSum) / m.stepMsSum : Number.NaN,
        errors: timings.length - ok.length,
      }
      results.push(r)
      console.error(`bench generate: ${mode} at ${rate}/s: ${fmt(r.tokensPerS, 0)} tokens/s`)
    }
  }
  return results
}

/** The tables: the runs, the capacities, the targets (issue 18) and the highest rate. */
function printReport(g: GenRun, b: { meanPrefill: number; decode1: number; ttftSlo: number; tpotSlo: number; prefill: number[] }, results: RunResult[], o16: Overhead): void {
  const { n, rates, scale, pr, or, threads, stepTokens } = g
  const { meanPrefill, decode1, ttftSlo, tpotSlo, prefill } = b
  const overhead16 = o16.ratio
  const batch16 = o16.batch
  const slo = (r: RunResult): boolean => percentile(r.ttft, 99) <= ttftSlo && percentile(r.tpot, 99) <= tpotSlo && r.errors === 0
  console.log(
    `cohort bench generate: test decoder (257 tokens, width 64, 2 layers, GQA slab), ${n} requests per run, prompts ${pr[0]}-${pr[1]}, outputs ${or[0]}-${or[1]} tokens (long-tailed; scale ${scale} for CPU), greedy, ignore EOS, maxStepTokens ${stepTokens}; ${threads} ORT thread(s), ${availableParallelism()} cores; engine level (worker thread, no HTTP)`,
  )
  console.log(
    `baselines (this run): mean prefill alone ${fmt(meanPrefill, 2)} ms, decode step at batch 1 ${fmt(decode1, 3)} ms -> SLO p99 TTFT <= ${fmt(ttftSlo, 1)} ms, p99 TPOT <= ${fmt(tpotSlo, 2)} ms`,
  )
  console.log(
    table(
      ['mode', 'rate/s', 'tokens/s', 'TTFT p50', 'TTFT p99', 'TPOT p50', 'TPOT p99', 'mean batch', 'overhead', 'SLO'],
      results.map((r) => [
        r.mode,
        String(r.rate),
        fmt(r.tokensPerS, 0),
        fmt(percentile(r.ttft, 50)),
        fmt(percentile(r.ttft, 99)),
        fmt(percentile(r.tpot, 50), 2),
        fmt(percentile(r.tpot, 99), 2),
        fmt(r.meanBatch, 1),
        `${fmt(r.overhead * 100, 1)}%`,
        slo(r) ? 'met' : 'missed',
      ]),
    ),
  )
  const capacity = (mode: Mode): RunResult | undefined => results.filter((r) => r.mode === mode && slo(r)).at(-1)
  const cc = capacity('continuous')
  const rc = capacity('request')
  const nc = capacity('none')
  const ratio = cc && rc ? cc.tokensPerS / rc.tokensPerS : Number.NaN
  const low = results.find((r) => r.mode === 'continuous' && r.rate === rates[0])
  // each of the calibrated prompts: its TTFT at the lowest rate / its prefill alone
  const lowRatio = low ? percentile(prefill.map((p, i) => (low.ttftAt[i] as number) / p).filter(Number.isFinite), 50) : Number.NaN
  console.log(
    `capacity (highest rate meeting the SLO): continuous ${cc ? `${cc.rate}/s, ${fmt(cc.tokensPerS, 0)} tokens/s` : 'none'}; request-level ${rc ? `${rc.rate}/s, ${fmt(rc.tokensPerS, 0)} tokens/s` : 'none'}; none ${nc ? `${nc.rate}/s, ${fmt(nc.tokensPerS, 0)} tokens/s` : 'none'}`,
  )
  console.log('targets (issue 18):')
  console.log(
    table(
      ['target', 'measured', 'result'],
      [
        ['continuous >= 3x request-level tokens/s at capacity', `${fmt(ratio, 2)}x`, ratio >= 3 ? 'met' : 'missed'],
        ['low-load TTFT <= 1.2x (its prefill alone + floor), median over prompts', `${fmt(lowRatio, 2)}x at ${rates[0]}/s`, lowRatio <= 1.2 ? 'met' : 'missed'],
        ['serving overhead <= 10% of step at 16 running, greedy', `${fmt(overhead16 * 100, 1)}% (mean batch ${fmt(batch16, 1)})`, overhead16 <= 0.1 ? 'met' : 'missed'],
      ],
    ),
  )
  const top = rates[rates.length - 1]
  const at = (mode: Mode): RunResult | undefined => results.find((r) => r.mode === mode && r.rate === top)
  const tc = at('continuous')
  const tr = at('request')
  const tn = at('none')
  if (tc && tr && tn) {
    console.log(
      `at the highest rate (${top}/s), SLO aside: continuous ${fmt(tc.tokensPerS, 0)} tokens/s = ${fmt(tc.tokensPerS / tr.tokensPerS, 2)}x request-level, ${fmt(tc.tokensPerS / tn.tokensPerS, 2)}x none`,
    )
  }
  if (!cc || !rc) console.log('note: a mode that met the SLO at no rate has no capacity; lower --rates to find it')
}
