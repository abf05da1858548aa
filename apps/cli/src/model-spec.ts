import { existsSync } from 'node:fs'
import { basename, extname } from 'node:path'
import { BATCHING_FIELDS, BATCHING_KEYS, type BatchingConfig, type BatchingKey } from '@cohort/batching'
import { isValidModelName } from '@cohort/protocol'
import { ensureDemoModel, ensureHeavyModel } from './demo-model.ts'
import { CliError } from './cli-error.ts'

/** A model's warm-up at load: `off`, or `count` runs of batches of each of `sizes` rows. */
export type WarmupSpec = 'off' | { count: number; sizes?: number[] }

/** A model to serve: a name, an ONNX file and its own flags. */
export interface ModelSpec {
  name: string
  path: string
  /** Per-model batching flags (`,max-batch-size=4`), over the global ones. */
  batching: Partial<BatchingConfig>
  /** Per-model warm-up (`,warmup=off`, `,warmup=3`, `,warmup=3x1:8`); absent: the runner's default. */
  warmup?: WarmupSpec
}

/** Per-model keys: every batching flag of `@cohort/batching`'s table, plus `warmup`. */
const BOOL_KEYS: Record<string, [BatchingKey, boolean]> = { 'no-admission': ['admission', false], 'no-auto-batch': ['autoBatchSize', false] }
const VALUE_KEYS: Record<string, BatchingKey> = Object.fromEntries(
  BATCHING_KEYS.flatMap((k): [string, BatchingKey][] => {
    const flag = BATCHING_FIELDS[k].flag
    return flag && !Object.hasOwn(BOOL_KEYS, flag) ? [[flag, k]] : []
  }),
)
/** The keys a `--model` spec takes after its path, for help and errors. */
export const MODEL_SPEC_KEYS: readonly string[] = [...Object.keys(VALUE_KEYS), ...Object.keys(BOOL_KEYS), 'warmup']

function batchingValue(key: BatchingKey, raw: string, spec: string): unknown {
  const v = key === 'policy' ? raw : /^[0-9]+(\.[0-9]+)?$/.test(raw) ? Number(raw) : Number.NaN
  if (!BATCHING_FIELDS[key].valid(v)) {
    throw new CliError(`${BATCHING_FIELDS[key].flag} in --model ${spec} must be ${BATCHING_FIELDS[key].expect}, got "${raw}"`)
  }
  return v
}

/** `off` | `N` (N runs at batch 1) | `NxA:B:C` (N runs of each batch size A, B, C). */
function warmupValue(raw: string, spec: string): WarmupSpec {
  if (raw === 'off' || raw === '0') {
    return 'off'
  }
  const m = /^([0-9]{1,3})(?:x([0-9]{1,6}(?::[0-9]{1,6})*))?$/.exec(raw)
  const count = m ? Number(m[1]) : 0
  const sizes = m?.[2]?.split(':').map(Number)
  if (!m || count < 1 || sizes?.some((s) => s < 1)) {
    throw new CliError(`warmup in --model ${spec} must be off, N or NxA:B (N runs of batch sizes A, B), got "${raw}"`)
  }
  return sizes ? { count, sizes } : { count }
}

/** Read the `,key=value` options after a model's path. */
function specOptions(opts: string[], spec: string): Pick<ModelSpec, 'batching' | 'warmup'> {
  const batching: Record<string, unknown> = {}
  let warmup: WarmupSpec | undefined
  for (const o of opts) {
    const eq = o.indexOf('=')
    const key = eq < 0 ? o : o.slice(0, eq)
    const raw = eq < 0 ? undefined : o.slice(eq + 1)
    const bool = Object.hasOwn(BOOL_KEYS, key) ? BOOL_KEYS[key] : undefined
    const valueKey = Object.hasOwn(VALUE_KEYS, key) ? VALUE_KEYS[key] : undefined
    if (bool !== undefined && raw === undefined) {
      const [k, v] = bool
      batching[k] = v
    } else if (valueKey !== undefined && raw !== undefined) {
      batching[valueKey] = batchingValue(valueKey, raw, spec)
    } else if (key === 'warmup' && raw !== undefined) {
      warmup = warmupValue(raw, spec)
    } else {
      throw new CliError(`unknown option "${o}" in --model ${spec} (known: ${MODEL_SPEC_KEYS.map((k) => (Object.hasOwn(BOOL_KEYS, k) ? k : `${k}=V`)).join(', ')})`)
    }
  }
  return { batching, ...(warmup !== undefined ? { warmup } : {}) }
}

/**
 * Parse `--model` values: `demo`, `heavy`, `NAME=PATH.onnx` or `PATH.onnx` (named after the file),
 * each optionally followed by per-model options: `NAME=PATH.onnx,max-batch-size=4,policy=timer`.
 */
export function parseModelSpec(spec: string): ModelSpec {
  const [head, ...opts] = spec.split(',')
  const own = specOptions(opts, spec)
  if (head === 'demo') {
    return { name: 'demo', path: ensureDemoModel(), ...own }
  }
  if (head === 'heavy') {
    return { name: 'heavy', path: ensureHeavyModel(), ...own }
  }
  const h = head ?? ''
  const eq = h.indexOf('=')
  const name = eq > 0 ? h.slice(0, eq) : basename(h, extname(h))
  const path = eq > 0 ? h.slice(eq + 1) : h
  if (!isValidModelName(name)) {
    throw new CliError(`invalid model name "${name}" in --model ${spec} (use letters, digits, '_', '-', '.')`)
  }
  if (eq < 0 && extname(h) === '' && !existsSync(path)) {
    throw new CliError(`--model ${spec}: give NAME=PATH of an .onnx file (--model ${name}=./${name}.onnx), a PATH.onnx (named after the file), demo or heavy`)
  }
  if (!existsSync(path)) {
    throw new CliError(`model file not found: ${path} (from --model ${spec})`)
  }
  return { name, path, ...own }
}
