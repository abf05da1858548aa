import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureDemoModel } from '@cohort/cli/demo-model'
import { gitCommit, machineInfo } from './run-info.ts'
import { LoadGenerator } from './load-worker.ts'
import { offlineCurve } from './offline.ts'
import { findPerfAnalyzer } from './peers-pa.ts'
import { formatPeersReport, peersSvg, type PeersResult } from './peers-report.ts'
import { runTarget, type PeerPlan, type TargetResult } from './peers-run.ts'
import { cohortTarget, parsePeers, parseVariants, peerTarget, PEERS, type Tuning } from './peers-targets.ts'
import { writeFloorModel } from './served.ts'
import { hasWrk } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchScope, type BenchValues } from './skeleton.ts'

/** Help of `cohort bench peers`. */
export const PEERS_HELP = `cohort bench peers [options]
Cohort beside Triton (PyTriton), Ray Serve, LitServe and BentoML on the same ONNX model, machine and
open-loop Poisson load, one server after another (docs/benchmarks.md, "Side by side"). Needs wrk and
test/peers/setup.sh (the peers' Python venv). Not part of any test suite.
  --peers LIST           triton, ray, litserve, bentoml (default: all; Cohort always runs first)
  --variants LIST        default, tuned (default: both; tuned also runs cohort-tuned: Cohort with
                         the bench's SLO as its server-side SLO, --slo-ms)
  --duration S           seconds per sweep/search/overload step (default 2; --quick 0.5)
  --quick                smoke run: short steps, one search probe, a 3-point sweep
  --slo-ms MS            SLO instead of the policies bench's (10 x t(1), or 10 x (t(1) + floor))
  --max-batch-size N     max batch of the tuned peers (default 32)
  --tuned-delay-ms MS    batching delay of tuned Triton, Ray, LitServe (default 2)
  --bentoml-max-latency-ms MS  max_latency_ms of tuned BentoML (default: the SLO)
  --perf-analyzer        also run perf_analyzer (test/python/.venv) against the OIP servers (Cohort, Triton)
                         at concurrency 1 and 16
  --svg FILE             latency-throughput plot (default docs/bench/peers-latency-throughput.svg; "none": skip)
  --out FILE             also write the results as JSON`

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

const PEERS_OPTIONS = {
  peers: { type: 'string' },
  variants: { type: 'string' },
  duration: { type: 'string' },
  quick: { type: 'boolean' },
  'slo-ms': { type: 'string' },
  'max-batch-size': { type: 'string' },
  'tuned-delay-ms': { type: 'string' },
  'bentoml-max-latency-ms': { type: 'string' },
  svg: { type: 'string' },
  out: { type: 'string' },
  'perf-analyzer': { type: 'boolean' },
} satisfies BenchCommand['options']

function options(v: BenchValues) {
  const quick = Boolean(v['quick'])
  const stepS = numFlag('duration', v['duration']) ?? (quick ? 0.5 : 2)
  if (!(stepS > 0)) {
    throw new CliError('--duration must be > 0')
  }
  const delay = numFlag('tuned-delay-ms', v['tuned-delay-ms']) ?? 2
  const plan: PeerPlan = {
    stepS,
    searchProbes: quick ? 1 : 3,
    capWarmS: 1,
    capS: quick ? 1 : 2,
    connections: 64,
    maxSockets: 1024,
    low: 0.05,
    lowMaxS: quick ? 1.5 : Math.max(3, 2 * stepS),
    sweep: quick ? [0.25, 0.75, 1.2] : [0.25, 0.5, 0.75, 0.9, 1.0, 1.2],
    overload: 2,
    gapMs: quick ? 200 : 500,
  }
  const svg = String(v['svg'] ?? join(ROOT, 'docs/bench/peers-latency-throughput.svg'))
  return {
    peers: parsePeers(String(v['peers'] ?? PEERS.join(','))),
    variants: parseVariants(String(v['variants'] ?? 'default,tuned')),
    plan,
    sloMs: numFlag('slo-ms', v['slo-ms']),
    maxBatchSize: intFlag('max-batch-size', v['max-batch-size']) ?? 32,
    delay: { triton: delay, ray: delay, litserve: delay },
    bentomlMaxLatencyMs: numFlag('bentoml-max-latency-ms', v['bentoml-max-latency-ms']),
    svg: svg === 'none' ? undefined : svg,
    out: v['out'] as string | undefined,
    perfAnalyzer: Boolean(v['perf-analyzer']),
  }
}

/**
 * `cohort bench peers`: Cohort at its defaults, then each peer (default and tuned batching
 * settings) serving the same ONNX file through onnxruntime Python, each measured by runTarget
 * (peers-run.ts) with the same SLO. Prints the tables and issue 8's targets, writes the SVG plot
 * and (`--out`) JSON. Every server is stopped on exit, on errors and on SIGINT/SIGTERM.
 */
export const benchPeersCommand = defineBenchCommand({
  help: PEERS_HELP,
  options: PEERS_OPTIONS,
  stopping: 'servers',
  run: async (v, _positionals, { args, track, untrack, log, startedAt, t0, load0, writeJson }) => {
    const o = options(v)
    const pa = loadTools(o.perfAnalyzer)
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-peers-'))
    track(() => {
      rmSync(dir, { recursive: true, force: true })
      return Promise.resolve()
    })
    const modelPath = ensureDemoModel()
    const t1Ms = (await offlineCurve({ path: modelPath, threads: 1, batches: [1], seconds: 1, ep: 'cpu' }))[0]?.p50Ms ?? Number.NaN
    let sloMs = Number.NaN
    let sloBasis = ''
    const slo = (floorP50: number): number => {
      if (Number.isFinite(sloMs)) {
        return sloMs
      }
      if (o.sloMs !== undefined) {
        ;[sloMs, sloBasis] = [o.sloMs, '--slo-ms']
      } else if (!Number.isFinite(floorP50) || 10 * t1Ms >= 3 * floorP50) {
        ;[sloMs, sloBasis] = [10 * t1Ms, '10 x t(1)']
      } else {
        ;[sloMs, sloBasis] = [10 * (t1Ms + floorP50), `10 x (t(1) + Cohort's HTTP floor ${floorP50.toFixed(2)} ms): 10 x t(1) is under 3 x the floor`]
      }
      return sloMs
    }
    log(`t(1) = ${t1Ms.toFixed(3)} ms; Cohort first (its floor fixes the SLO), then ${o.peers.join(', ')} (${o.variants.join(', ')})`)
    let gen = LoadGenerator.start()
    track(() => gen.stop())
    const targets: TargetResult[] = []
    const errors: string[] = []
    const tuning = (): Tuning => ({ maxBatchSize: o.maxBatchSize, delayMs: o.delay, bentomlMaxLatencyMs: o.bentomlMaxLatencyMs ?? sloMs })
    const run = async (make: () => Parameters<typeof runTarget>[0]) => {
      const target = make()
      if (!gen.running) {
        log('the load generator died; starting a new one')
        gen = LoadGenerator.start()
      }
      try {
        const perfAnalyzer = pa ? { pa, concurrencies: [1, 16] } : undefined
        targets.push(await runTarget(target, { plan: o.plan, gen, dir, slo, log, perfAnalyzer, track, untrack }))
      } catch (e) {
        const msg = `${target.name}: ${e instanceof Error ? e.message : String(e)}`
        log(`failed: ${msg}`)
        errors.push(msg.split('\n')[0] as string)
      }
    }
    const floorPath = writeFloorModel(dir)
    await run(() => cohortTarget({ modelPath, floorPath }))
    if (o.variants.includes('tuned') && Number.isFinite(sloMs)) {
      await run(() => cohortTarget({ modelPath, floorPath, sloMs }))
    }
    for (const peer of o.peers) {
      for (const variant of o.variants) {
        // Built after Cohort's run: tuned BentoML's max_latency_ms defaults to the SLO.
        await run(() => peerTarget(peer, variant, tuning(), { root: ROOT, modelPath }))
      }
    }
    const result: PeersResult = {
      startedAt,
      commit: gitCommit(),
      command: `cohort bench peers ${args.join(' ')}`.trim(),
      wallS: (performance.now() - t0) / 1000,
      machine: machineInfo(load0),
      t1Ms,
      sloMs,
      sloBasis,
      tuning: tuning(),
      plan: o.plan,
      targets,
      errors,
    }
    console.log(formatPeersReport(result))
    writeResult(result, o, log, writeJson)
    if (errors.length > 0) {
      throw new CliError(`some servers failed: ${errors.join('; ')}`)
    }
  },
})

/** Checks that wrk is on PATH; perf_analyzer when `perfAnalyzer` is asked for (its path, else undefined). */
function loadTools(perfAnalyzer: boolean | undefined): ReturnType<typeof findPerfAnalyzer> | undefined {
  if (!hasWrk()) {
    throw new CliError('cohort bench peers needs wrk on PATH (the closed-loop capacity runs)')
  }
  const pa = perfAnalyzer ? findPerfAnalyzer(ROOT) : undefined
  if (perfAnalyzer && !pa) {
    throw new CliError('--perf-analyzer: test/python/.venv/bin/perf_analyzer is missing (run test/python/setup.sh)')
  }
  return pa
}

/** The chart (`--svg`, when a target ran) and the JSON (`--out`). */
function writeResult(result: PeersResult, o: { svg?: string | undefined; out?: string | undefined }, log: BenchScope['log'], writeJson: BenchScope['writeJson']): void {
  if (o.svg && result.targets.length > 0) {
    mkdirSync(dirname(o.svg), { recursive: true })
    writeFileSync(o.svg, peersSvg(result))
    log(`wrote ${o.svg}`)
  }
  if (o.out) {
    writeJson(o.out, result)
  }
}
