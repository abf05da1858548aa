import { parseArgs, type ParseArgsConfig } from 'node:util'
import { BATCHING_FIELDS, type BatchingKey } from '@cohort/batching'
import { CliError } from './cli-error.ts'

/** parseArgs with one-line errors. */
export function parse(
  args: string[],
  options: NonNullable<ParseArgsConfig['options']>,
  allowPositionals = false,
): { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] } {
  try {
    const r = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals })
    return { values: r.values as Record<string, string | boolean | string[] | undefined>, positionals: r.positionals }
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e)
    const unknown = /^Unknown option '([^']+)'/.exec(msg)
    throw new CliError(unknown ? `unknown option ${unknown[1]} (--help lists this command's options)` : msg)
  }
}

/** A positive integer flag, or undefined. */
export function intFlag(name: string, v: unknown, min = 1): number | undefined {
  if (v === undefined) {
    return undefined
  }
  // Decimal digits only: Number() would also take "0x10", "1e3" and " 7".
  const n = typeof v === 'string' && /^-?[0-9]{1,15}$/.test(v) ? Number(v) : typeof v === 'number' ? v : Number.NaN
  if (!Number.isInteger(n) || n < min) {
    throw new CliError(`--${name} must be an integer >= ${min}, got "${String(v)}"`)
  }
  return n
}

/** A non-negative number flag, or undefined. */
export function numFlag(name: string, v: unknown): number | undefined {
  if (v === undefined) {
    return undefined
  }
  const n = Number(v)
  if (!Number.isFinite(n) || n < 0) {
    throw new CliError(`--${name} must be a number >= 0, got "${String(v)}"`)
  }
  return n
}

/**
 * A batching flag's number checked against `@cohort/batching`'s field table (the same bounds as
 * admin patches), or undefined when the flag is absent.
 */
export function batchingFlag(key: BatchingKey, n: number | undefined): number | undefined {
  const f = BATCHING_FIELDS[key]
  if (n !== undefined && !f.valid(n)) {
    throw new CliError(`--${f.flag ?? key} must be ${f.expect}, got "${n}"`)
  }
  return n
}

/** Options shared by serve and worker. */
export const MODEL_OPTIONS = {
  model: { type: 'string', multiple: true },
  predictor: { type: 'string', multiple: true },
  generative: { type: 'string', multiple: true },
  'ttft-slo-ms': { type: 'string' },
  'generation-slo-ms': { type: 'string' },
  ep: { type: 'string', default: 'cpu' },
  instances: { type: 'string' },
  'ort-processes': { type: 'boolean' },
  threads: { type: 'string' },
  'max-batch-size': { type: 'string' },
  'max-delay-ms': { type: 'string' },
  'batch-timeout-ms': { type: 'string' },
  policy: { type: 'string' },
  'max-queue': { type: 'string' },
  'max-batch-cost': { type: 'string' },
  'slo-ms': { type: 'string' },
  'max-tenant-queue': { type: 'string' },
  'no-admission': { type: 'boolean' },
  'no-auto-batch': { type: 'boolean' },
  pad: { type: 'boolean' },
  'pad-value': { type: 'string' },
  'mask-input': { type: 'string' },
  buckets: { type: 'string' },
} as const

/** Help text of the shared model flags ({@link BATCHING_HELP} has the batching ones). */
export const MODEL_HELP = `  --model SPEC[,K=V...]  ONNX model: demo | heavy | NAME=PATH.onnx | PATH.onnx (repeatable), with
                         its own flags after commas, over the global ones: max-batch-size=N,
                         max-delay-ms=MS, policy=P, max-queue=N, max-batch-cost=N, no-admission,
                         no-auto-batch, warmup=off|N|NxA:B (N runs at batch sizes A, B; default 1x1)
  --predictor FILE       TypeScript/JS module exporting definePredictor(...) (repeatable)
  --generative NAME=PATH generative model (docs/generative.md): PATH a module (.ts/.js) whose default
                         export makes a Generator, or an ONNX decoder (.onnx) (repeatable)
  --ttft-slo-ms MS       ONNX decoders: the time-to-first-token SLO they announce, the budget of a
                         generation whose client sets none (default 10000)
  --generation-slo-ms MS ONNX decoders: the whole-generation SLO they announce (default none: the
                         gateway's request timeout)
  --ep cpu|webgpu|cuda   ONNX Runtime execution provider (default cpu)
  --instances N          ORT sessions per model: threads on cpu, processes on GPU EPs (default 1)
  --ort-processes        run every ORT instance in a child process, even on cpu (a stuck
                         session.run() can then be killed at --batch-timeout-ms)
  --threads N            ORT intra-op threads per instance (default: (cores - 1) / instances, at
                         least 1: one core is left to the serving path; pool threads never spin)`

/** Help text of the shared batching flags. */
export const BATCHING_HELP = `  --max-batch-size N     hard cap of items per batch (default: ONNX models 256, predictors their own)
  --no-auto-batch        ONNX: keep the batch cap at --max-batch-size (default: the worker tunes it
                         within [1, max] for items/s under the latency budget; starts at 32)
  --max-delay-ms MS      max hold time of the timer policy (default 5)
  --batch-timeout-ms MS  per-batch time limit: a batch past it fails with 504 BATCH_TIMEOUT and its
                         runner restarts (default max(10000, 20 x learned t(b)); 0: none)
  --policy eager|deadline|timer
                         batching policy (default eager: dispatch at once when idle)
  --max-queue N          queued items per model before 503 (default 4096)
  --no-admission         eager/deadline: queue items even when they are estimated to finish late
                         (default: refuse them on arrival with 503 OVERLOADED)
  --max-batch-cost N     cost units per batch (tokens, pixels: product of dynamic dims; default no limit)
  --max-tenant-queue N   queued items per tenant (API key, JWT subject) before 503 (default 0: only
                         --max-queue)
  --slo-ms MS            server-side SLO: the deadline of requests whose client sends none (default
                         0: derived, max(1000, 4 x learned t(max-batch-size)); 2000 before a sample)
  --pad                  ONNX: batch items of different lengths by bucket, padded to the longest
  --pad-value V          value in padded positions (default 0)
  --mask-input NAME      ONNX input Cohort fills with the attention mask (1 real, 0 padding)
  --buckets A,B,C        length bucket bounds (default powers of two)`
