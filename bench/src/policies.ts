import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureDemoModel } from '@cohort/cli/demo-model'
import { demoBody, FLOOR_BODY } from './bodies.ts'
import { gitCommit, machineInfo } from './run-info.ts'
import { LoadGenerator } from './load-worker.ts'
import { offlineCurve } from './offline.ts'
import { formatPoliciesReport, type ModelResult, type PoliciesResult } from './policy-report.ts'
import { runConfig, type BenchModel, type PolicyConfig, type ScenarioPlan } from './scenarios.ts'
import { writeFloorModel } from './served.ts'
import { latencyThroughputSvg } from './svg.ts'
import { hasWrk, writeWrkScript } from './wrk.ts'
import { defineBenchCommand, type BenchCommand, type BenchValues } from './skeleton.ts'

/** Help of `cohort bench policies`. */
export const POLICIES_HELP = `cohort bench policies [options]
Batching policies under open-loop Poisson load (docs/benchmarks.md, "Batching policies"): per model and
policy config, one \`cohort serve --threads 1\`: capacity, floor, 5% load, rate sweep, capacity at the
SLO (p99 <= 10 x t(1)), bursts from idle and overload; tables, targets, SVG plots.
  --models LIST          affine, demo (default affine,demo; --quick: affine)
  --policies LIST        eager, deadline[-MS], timer-MS, nobatch; suffixes serve that config with
                         admission off: -noadm (--no-admission --no-front-door), -noqa (only
                         --no-admission), -nofd (only --no-front-door); e.g. eager-noadm
                         (default eager,deadline,timer-1,timer-5,timer-10,nobatch; --quick: eager,timer-5,nobatch)
  --quick                short smoke run (~1 min): short steps, fewer search probes
  --duration S           seconds per sweep/search/overload step (default 2; --quick 0.5)
  --max-batch-size N     max batch of the batching configs (default 32; nobatch is 1)
  --slo-ms MS            SLO instead of 10 x t(1) (same for every model)
  --affine-a MS          fixed cost a of the affine predictor (default 5)
  --affine-c MS          per-item cost c of the affine predictor (default 0.5)
  --ep cpu|webgpu|cuda   execution provider of the ONNX models (default cpu)
  --threads N            ORT intra-op threads of the servers (default 1)
  --max-queue N          --max-queue of the servers (default: the server's 4096)
  --max-sockets N        connection cap of the open-loop load generator (default 1024)
  --svg-dir DIR          where to write <model>-latency-throughput.svg (default docs/bench; "none": skip)
  --out FILE             also write the results as JSON`

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const AFFINE_FIXTURE = join(ROOT, 'test/fixtures/affine-predictor.ts')

/** Parse one policy config label: eager | deadline[-MS] | timer[-MS] | nobatch, optionally + `-noadm`, `-noqa` or `-nofd`. */
export function parsePolicy(label: string, maxBatchSize: number): PolicyConfig {
  for (const [suffix, off] of [
    ['-noadm', 'both'],
    ['-noqa', 'queue'],
    ['-nofd', 'door'],
  ] as const) {
    if (label.endsWith(suffix)) {
      const base = parsePolicy(label.slice(0, -suffix.length), maxBatchSize)
      return { ...base, name: `${base.name}${suffix}`, noAdmission: off }
    }
  }
  const m = /^(eager|deadline|timer|nobatch)(?:-(\d+(?:\.\d+)?))?$/.exec(label)
  if (!m || ((m[1] === 'eager' || m[1] === 'nobatch') && m[2] !== undefined)) {
    throw new CliError(`--policies: unknown policy config "${label}" (use eager, deadline[-MS], timer-MS, nobatch)`)
  }
  if (m[1] === 'nobatch') {
    return { name: 'nobatch', policy: 'eager', maxBatchSize: 1 }
  }
  const policy = m[1] as PolicyConfig['policy']
  const delay = m[2] !== undefined ? Number(m[2]) : policy === 'timer' ? 5 : undefined
  return { name: policy === 'timer' ? `timer-${delay}` : label, policy, maxBatchSize, ...(delay !== undefined ? { maxDelayMs: delay } : {}) }
}

const list = (v: BenchValues[string], dflt: string) =>
  String(v ?? dflt)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)

const POLICIES_OPTIONS = {
  models: { type: 'string' },
  policies: { type: 'string' },
  quick: { type: 'boolean' },
  duration: { type: 'string' },
  'max-batch-size': { type: 'string' },
  'slo-ms': { type: 'string' },
  'affine-a': { type: 'string' },
  'affine-c': { type: 'string' },
  ep: { type: 'string' },
  threads: { type: 'string' },
  'max-queue': { type: 'string' },
  'svg-dir': { type: 'string' },
  'max-sockets': { type: 'string' },
  out: { type: 'string' },
} satisfies BenchCommand['options']

function options(v: BenchValues) {
  const quick = Boolean(v['quick'])
  const maxBatchSize = intFlag('max-batch-size', v['max-batch-size']) ?? 32
  const models = list(v['models'], quick ? 'affine' : 'affine,demo')
  for (const m of models) {
    if (m !== 'affine' && m !== 'demo') {
      throw new CliError(`--models: unknown model "${m}" (use affine, demo)`)
    }
  }
  const policies = list(v['policies'], quick ? 'eager,timer-5,nobatch' : 'eager,deadline,timer-1,timer-5,timer-10,nobatch').map((p) => parsePolicy(p, maxBatchSize))
  const stepS = numFlag('duration', v['duration']) ?? (quick ? 0.5 : 2)
  const plan: ScenarioPlan = {
    stepS,
    searchS: stepS,
    searchProbes: quick ? 2 : 3,
    capWarmS: 1,
    capS: quick ? 1 : 2,
    connections: 64,
    maxSockets: intFlag('max-sockets', v['max-sockets']) ?? 1024,
    burstS: quick ? 0.2 : 0.25,
    lowMaxS: quick ? 1.5 : Math.max(3, 2 * stepS),
    gapMs: quick ? 200 : 300,
    sweep: [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.2],
    overload: [1.5, 2, 4],
    bursts: [3, 10],
    low: 0.05,
    maxLagMs: 10,
    retries: quick ? 1 : 2,
  }
  const svgDir = String(v['svg-dir'] ?? join(ROOT, 'docs/bench'))
  return {
    quick,
    models: models as ('affine' | 'demo')[],
    policies,
    plan,
    maxBatchSize,
    sloMs: numFlag('slo-ms', v['slo-ms']),
    affineA: numFlag('affine-a', v['affine-a']) ?? 5,
    affineC: numFlag('affine-c', v['affine-c']) ?? 0.5,
    ep: String(v['ep'] ?? 'cpu'),
    threads: intFlag('threads', v['threads']) ?? 1,
    maxQueue: intFlag('max-queue', v['max-queue']),
    svgDir: svgDir === 'none' ? undefined : svgDir,
    out: v['out'] as string | undefined,
  }
}

type Options = NonNullable<ReturnType<typeof options>>

async function prepareModel(name: 'affine' | 'demo', o: Options, dir: string, wrk: boolean): Promise<{ model: BenchModel; t1Ms: number; t1Basis: string }> {
  if (name === 'affine') {
    const body = JSON.stringify({ input: { x: 1 } })
    return {
      model: {
        name,
        serveArgs: ['--predictor', AFFINE_FIXTURE],
        env: { AFFINE_A_MS: String(o.affineA), AFFINE_C_MS: String(o.affineC) },
        path: '/models/affine/predictions',
        floorPath: '/models/floor/predictions',
        body,
        floorBody: body,
        wrkScript: wrk ? writeWrkScript(dir, 'affine', body) : undefined,
      },
      t1Ms: o.affineA + o.affineC,
      t1Basis: `a + c = ${o.affineA} + ${o.affineC} (test/fixtures/affine-predictor.ts sleeps a + c*b ms)`,
    }
  }
  const demoPath = ensureDemoModel()
  const body = demoBody()
  const offline = await offlineCurve({ path: demoPath, threads: o.threads, batches: [1], seconds: o.quick ? 0.5 : 1, ep: o.ep })
  return {
    model: {
      name,
      serveArgs: ['--model', `demo=${demoPath}`, '--model', `floor=${writeFloorModel(dir)}`],
      env: {},
      path: '/v2/models/demo/infer',
      floorPath: '/v2/models/floor/infer',
      body,
      floorBody: FLOOR_BODY,
      wrkScript: wrk ? writeWrkScript(dir, 'demo', body) : undefined,
    },
    t1Ms: offline[0]?.p50Ms ?? Number.NaN,
    t1Basis: `offline onnxruntime-node p50 of session.run at b=1 (${o.ep}, ${o.threads} thread)`,
  }
}

/**
 * `cohort bench policies`: the batching-policy benchmark. For each model (the affine sleep
 * predictor, the demo ONNX MLP) and each policy config it starts its own `cohort serve`, and a
 * separate load-generator process sends open-loop Poisson load (scenarios.ts). Prints the tables
 * and the issue's targets, writes SVG plots and (`--out`) JSON. Every child process is stopped on
 * exit, on errors and on SIGINT/SIGTERM.
 */
export const benchPoliciesCommand = defineBenchCommand({
  help: POLICIES_HELP,
  options: POLICIES_OPTIONS,
  run: async (v, _positionals, { args, track, untrack, log, startedAt, t0, load0, writeJson }) => {
    const o = options(v)
    const dir = mkdtempSync(join(tmpdir(), 'cohort-bench-policies-'))
    track(() => {
      rmSync(dir, { recursive: true, force: true })
      return Promise.resolve()
    })
    const wrk = hasWrk()
    if (!wrk) {
      log('warning: wrk is not installed; capacity comes from a Node closed loop in this process')
    }
    let gen = LoadGenerator.start()
    track(() => gen.stop())
    const models: ModelResult[] = []
    for (const name of o.models) {
      const { model, t1Ms, t1Basis } = await prepareModel(name, o, dir, wrk)
      const mr: ModelResult = { name, t1Ms, t1Basis, referenceRate: Number.NaN, floorP50Ms: Number.NaN, sloMs: Number.NaN, sloBasis: '', configs: [], errors: [] }
      models.push(mr)
      log(`${name}: t(1) = ${t1Ms.toFixed(3)} ms (${t1Basis})`)
      const slo = (floorP50: number): number => {
        if (Number.isFinite(mr.sloMs)) {
          return mr.sloMs
        }
        mr.floorP50Ms = floorP50
        if (o.sloMs !== undefined) {
          mr.sloMs = o.sloMs
          mr.sloBasis = '--slo-ms'
        } else if (10 * t1Ms >= 3 * floorP50) {
          mr.sloMs = 10 * t1Ms
          mr.sloBasis = '10 x t(1)'
        } else {
          mr.sloMs = 10 * (t1Ms + floorP50)
          mr.sloBasis = `10 x (t(1) + floor): 10 x t(1) = ${(10 * t1Ms).toFixed(2)} ms is under 3 x the HTTP floor (${floorP50.toFixed(2)} ms)`
        }
        return mr.sloMs
      }
      const reference = (closedLoop: number): number => (Number.isFinite(mr.referenceRate) ? mr.referenceRate : (mr.referenceRate = closedLoop))
      for (const config of o.policies) {
        if (!gen.running) {
          log('the load generator died; starting a new one')
          gen = LoadGenerator.start()
        }
        try {
          const serveFlags = ['--threads', String(o.threads), '--ep', o.ep, ...(o.maxQueue ? ['--max-queue', String(o.maxQueue)] : [])]
          mr.configs.push(await runConfig({ model, config, plan: o.plan, gen, serveFlags, reference, slo, log, track, untrack }))
        } catch (e) {
          const msg = `${config.name}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`
          log(`[${name}] failed: ${msg}`)
          mr.errors.push(msg)
        }
      }
    }
    const result: PoliciesResult = {
      startedAt,
      commit: gitCommit(),
      command: `cohort bench policies ${args.join(' ')}`.trim(),
      wallS: (performance.now() - t0) / 1000,
      machine: machineInfo(load0),
      options: { ep: o.ep, threads: o.threads, maxBatchSize: o.maxBatchSize, maxQueue: o.maxQueue, affineA: o.affineA, affineC: o.affineC, plan: o.plan },
      models,
    }
    console.log(formatPoliciesReport(result))
    if (o.svgDir) {
      mkdirSync(o.svgDir, { recursive: true })
      for (const m of models) {
        const file = join(o.svgDir, `${m.name}-latency-throughput.svg`)
        writeFileSync(file, latencyThroughputSvg(m))
        log(`wrote ${file}`)
      }
    }
    if (o.out) {
      writeJson(o.out, result)
    }
    if (models.some((m) => m.errors.length > 0)) {
      throw new CliError(`some configs failed: ${models.flatMap((m) => m.errors.map((e) => `${m.name} ${e}`)).join('; ')}`)
    }
  },
})
