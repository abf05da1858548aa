import { OnnxRunner, PredictorRunner, generativeRunner, loadPredictors, type ExecutionProvider, type ModelRunner, type PaddingOptions } from '@cohort/worker'
import type { BatchingConfig } from '@cohort/batching'
import type { TSchema } from '@sinclair/typebox'
import { isValidModelName, type GenerativeSlo } from '@cohort/protocol'
import { CliError } from './cli-error.ts'
import { parseModelSpec } from './model-spec.ts'

/** Flags shared by `serve` and `worker` that choose and tune models. */
export interface ModelFlags {
  model: string[]
  predictor: string[]
  /** `--generative NAME=PATH` (docs/generative.md). */
  generative?: string[] | undefined
  /** `--ttft-slo-ms` and `--generation-slo-ms`: the SLO ONNX decoders announce (docs/generative.md#deadlines-and-the-server-slo). */
  generativeSlo?: GenerativeSlo | undefined
  ep: string
  instances: number
  /** ORT instances in child processes (--ort-processes). */
  ortProcesses?: boolean | undefined
  threads: number | undefined
  /** `--inline-run-ms`: the ONNX runners' inline lane threshold (undefined: the runner's default). */
  inlineRunMs?: number | undefined
  maxBatchSize: number | undefined
  maxDelayMs: number | undefined
  /** Per-batch time limit in ms (0: none); undefined: the worker's default. */
  batchTimeoutMs?: number | undefined
  padding?: PaddingOptions | undefined
}

const EPS = ['cpu', 'webgpu', 'cuda'] as const

/** Build the runners for `--model` and `--predictor` flags. */
export async function buildRunners(
  f: ModelFlags,
): Promise<{ runners: ModelRunner[]; outputSchemas: Record<string, TSchema | undefined>; modelBatching: Record<string, Partial<BatchingConfig>> }> {
  if (!(EPS as readonly string[]).includes(f.ep)) {
    throw new CliError(`--ep must be one of ${EPS.join(', ')}, got "${f.ep}"`)
  }
  const runners: ModelRunner[] = []
  const outputSchemas: Record<string, TSchema | undefined> = {}
  // Per-model flags (`--model NAME=PATH,max-batch-size=4`): the worker layers them over the global
  // flags (`CohortWorkerOptions.modelBatching`), so each model keeps its own.
  const modelBatching: Record<string, Partial<BatchingConfig>> = {}
  for (const spec of f.model) {
    const m = parseModelSpec(spec)
    if (Object.keys(m.batching).length > 0) {
      modelBatching[m.name] = m.batching
    }
    runners.push(
      new OnnxRunner({
        name: m.name,
        path: m.path,
        ep: f.ep as ExecutionProvider,
        instances: f.instances,
        ...(f.ortProcesses ? { processes: true } : {}),
        ...(f.threads !== undefined ? { intraOpNumThreads: f.threads } : {}),
        ...(f.inlineRunMs !== undefined ? { inlineRunMs: f.inlineRunMs } : {}),
        ...(f.padding ? { padding: f.padding } : {}),
        ...(m.warmup !== undefined ? { warmup: m.warmup } : {}),
      }),
    )
  }
  for (const path of f.predictor) {
    let ps
    try {
      ps = await loadPredictors(path)
    } catch (e) {
      throw new CliError(e instanceof Error ? e.message : String(e))
    }
    for (const p of ps) {
      runners.push(new PredictorRunner(p, { modulePath: path }))
      outputSchemas[p.name] = p.output
    }
  }
  for (const spec of f.generative ?? []) {
    const eq = spec.indexOf('=')
    const name = spec.slice(0, eq)
    const path = spec.slice(eq + 1)
    if (eq <= 0 || path === '' || !isValidModelName(name)) {
      throw new CliError(`--generative must be NAME=PATH (a generator module or an ONNX decoder), got "${spec}"`)
    }
    try {
      runners.push(generativeRunner(name, path, f.generativeSlo))
    } catch (e) {
      throw new CliError(e instanceof Error ? e.message : String(e))
    }
  }
  const names = runners.map((r) => r.name)
  const dup = names.find((n, i) => names.indexOf(n) !== i)
  if (dup) {
    throw new CliError(`model "${dup}" is given twice`)
  }
  return { runners, outputSchemas, modelBatching }
}
