import { parseBatchingPatch, type BatchingConfig, type BatchingKey } from '@cohort/batching'
import type { ModelConfig, ModelConfigBatching } from '@cohort/predictor'
import { isValidVersion } from '@cohort/protocol'
import type { ExecutionProvider } from '../ort/ort-pool.ts'
import type { PaddingOptions } from '../runners/padding.ts'

/**
 * Which versions of a model are served (Triton's `version_policy`): the newest `latest` (default
 * 1), `all`, or the `specific` ones listed.
 */
export type VersionPolicy = { latest: number } | { all: true } | { specific: string[] }

/** The default version policy: the newest version only. */
export const DEFAULT_VERSION_POLICY: VersionPolicy = { latest: 1 }

/**
 * A repository model's `config.json` (docs/repository.md#configjson): everything the per-model
 * flags hold. Every field is optional.
 */
export interface RepositoryModelConfig {
  versionPolicy: VersionPolicy
  /** The `file` layer of the batching fields (`maxBatchSize`, `maxDelayMs`, `policy`, `maxQueue`, `sloMs`, ...). */
  batching: Partial<BatchingConfig>
  instances?: number
  threads?: number
  ep?: ExecutionProvider
  /** ORT instances in child processes. */
  processes?: boolean
  padding?: PaddingOptions
  warmup?: 'off' | { count: number; sizes?: number[] }
}

// The type users write (`ModelConfig` of @cohort/predictor) names the same keys and batching fields.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
true satisfies Same<keyof ModelConfig, (typeof CONFIG_KEYS)[number]>
true satisfies Same<keyof ModelConfigBatching, BatchingKey>

/** The keys `config.json` takes. */
export const CONFIG_KEYS = ['versionPolicy', 'batching', 'instances', 'threads', 'ep', 'processes', 'padding', 'warmup'] as const

const EPS: readonly ExecutionProvider[] = ['cpu', 'webgpu', 'cuda']

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const isInt = (v: unknown, lo: number, hi: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi

/**
 * Read and validate a `config.json` value (already JSON-parsed), or the default export of a
 * `config.ts` (the same object, typed as `ModelConfig` of @cohort/predictor). Every bad field is
 * reported at once, each with its line in `text` (the file as read) when given.
 * @throws RangeError naming each bad field, its value and what is expected: `line 3: instances must
 * be ...; line 5: ep must be ...`.
 */
export function parseModelConfig(raw: unknown, fileName = 'config.json', text?: string): RepositoryModelConfig {
  if (raw === undefined) {
    return { versionPolicy: DEFAULT_VERSION_POLICY, batching: {} }
  }
  if (!isObj(raw)) {
    throw new RangeError(fileName === 'config.json' ? 'config.json must hold a JSON object' : `${fileName} must export default an object`)
  }
  const errors: string[] = []
  const field = (key: string, read: () => void) => {
    try {
      read()
    } catch (e) {
      const line = text === undefined ? undefined : lineOfKey(text, key)
      errors.push(`${line === undefined ? '' : `line ${line}: `}${e instanceof Error ? e.message : String(e)}`)
    }
  }
  for (const k of Object.keys(raw)) {
    if (!(CONFIG_KEYS as readonly string[]).includes(k)) {
      field(k, () => {
        throw new RangeError(`unknown field ${JSON.stringify(k)} (known: ${CONFIG_KEYS.join(', ')})`)
      })
    }
  }
  const out: RepositoryModelConfig = { versionPolicy: DEFAULT_VERSION_POLICY, batching: {} }
  field('versionPolicy', () => (out.versionPolicy = versionPolicyOf(raw['versionPolicy'])))
  if (raw['batching'] !== undefined) {
    field('batching', () => {
      try {
        out.batching = parseBatchingPatch(raw['batching'], { strict: true })
      } catch (e) {
        throw new RangeError(`batching: ${e instanceof Error ? e.message : String(e)}`)
      }
    })
  }
  if (raw['instances'] !== undefined) {
    field('instances', () => {
      if (!isInt(raw['instances'], 1, 64)) {
        throw new RangeError(`instances must be an integer from 1 to 64, got ${JSON.stringify(raw['instances'])}`)
      }
      out.instances = raw['instances']
    })
  }
  if (raw['threads'] !== undefined) {
    field('threads', () => {
      if (!isInt(raw['threads'], 1, 1024)) {
        throw new RangeError(`threads must be an integer from 1 to 1024, got ${JSON.stringify(raw['threads'])}`)
      }
      out.threads = raw['threads']
    })
  }
  if (raw['ep'] !== undefined) {
    field('ep', () => {
      if (!EPS.includes(raw['ep'] as ExecutionProvider)) {
        throw new RangeError(`ep must be one of ${EPS.join(', ')}, got ${JSON.stringify(raw['ep'])}`)
      }
      out.ep = raw['ep'] as ExecutionProvider
    })
  }
  if (raw['processes'] !== undefined) {
    field('processes', () => {
      if (typeof raw['processes'] !== 'boolean') {
        throw new RangeError(`processes must be true or false, got ${JSON.stringify(raw['processes'])}`)
      }
      out.processes = raw['processes']
    })
  }
  if (raw['padding'] !== undefined) {
    field('padding', () => (out.padding = paddingOf(raw['padding'])))
  }
  if (raw['warmup'] !== undefined) {
    field('warmup', () => (out.warmup = warmupOf(raw['warmup'])))
  }
  if (errors.length > 0) {
    throw new RangeError(errors.join('; '))
  }
  return out
}

/** 1-based line of the first `"key":` of a JSON text (a top-level key of config.json), or undefined. */
export function lineOfKey(text: string, key: string): number | undefined {
  const at = text.indexOf(JSON.stringify(key))
  if (at < 0) {
    return undefined
  }
  let line = 1
  for (let i = 0; i < at; i++) {
    if (text.charCodeAt(i) === 10) {
      line++
    }
  }
  return line
}

/**
 * A JSON.parse error of `text` with the line it points at. Node names a position for most errors
 * ("at position N"); for the others ("Unexpected token 'c', ..."), the offset is found by bisection:
 * the shortest prefix that fails other than by ending early (an error at its very end) ends at it.
 */
export function jsonSyntaxError(text: string, e: unknown): RangeError {
  const msg = e instanceof Error ? e.message : String(e)
  const positionOf = (m: string): number | undefined => {
    const p = /at position (\d+)/.exec(m)
    return p ? Number(p[1]) : undefined
  }
  const bad = (n: number): boolean => {
    try {
      JSON.parse(text.slice(0, n))
      return false
    } catch (x) {
      const m = x instanceof Error ? x.message : String(x)
      return !/Unexpected end of JSON input/.test(m) && positionOf(m) !== n
    }
  }
  if (/line \d+/.test(msg)) {
    return new RangeError(msg)
  }
  let at = positionOf(msg)
  if (at === undefined && bad(text.length)) {
    let lo = 0
    let hi = text.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (bad(mid)) {
        hi = mid
      } else {
        lo = mid + 1
      }
    }
    at = lo - 1
  }
  return new RangeError(at === undefined ? msg : `line ${text.slice(0, at).split('\n').length}: ${msg}`)
}

function versionPolicyOf(v: unknown): VersionPolicy {
  if (v === undefined) {
    return DEFAULT_VERSION_POLICY
  }
  const expect = 'expected {"latest": N}, "all" or {"specific": ["1", "3"]}'
  if (v === 'all') {
    return { all: true }
  }
  if (isObj(v) && Object.keys(v).length === 1) {
    if (v['latest'] !== undefined) {
      if (!isInt(v['latest'], 1, 1000)) {
        throw new RangeError(`versionPolicy.latest must be an integer from 1 to 1000, got ${JSON.stringify(v['latest'])}`)
      }
      return { latest: v['latest'] }
    }
    if (Array.isArray(v['specific'])) {
      const list = v['specific'].map((x: unknown) => (typeof x === 'number' ? String(x) : x))
      if (list.length === 0 || !list.every((x): x is string => typeof x === 'string' && isValidVersion(x))) {
        throw new RangeError(`versionPolicy.specific must list versions (positive integers), got ${JSON.stringify(v['specific'])}`)
      }
      return { specific: [...new Set(list)] }
    }
  }
  throw new RangeError(`versionPolicy: ${expect}, got ${JSON.stringify(v)}`)
}

function paddingOf(v: unknown): PaddingOptions {
  if (!isObj(v)) {
    throw new RangeError(`padding must be an object {padValue?, maskInput?, buckets?}, got ${JSON.stringify(v)}`)
  }
  const out: PaddingOptions = {}
  for (const k of Object.keys(v)) {
    if (!['padValue', 'maskInput', 'buckets'].includes(k)) {
      throw new RangeError(`unknown field padding.${k} (known: padValue, maskInput, buckets)`)
    }
  }
  if (v['padValue'] !== undefined) {
    if (typeof v['padValue'] !== 'number' || !Number.isFinite(v['padValue'])) {
      throw new RangeError(`padding.padValue must be a number, got ${JSON.stringify(v['padValue'])}`)
    }
    out.padValue = v['padValue']
  }
  if (v['maskInput'] !== undefined) {
    if (typeof v['maskInput'] !== 'string' || v['maskInput'] === '') {
      throw new RangeError(`padding.maskInput must be an input name, got ${JSON.stringify(v['maskInput'])}`)
    }
    out.maskInput = v['maskInput']
  }
  if (v['buckets'] !== undefined) {
    const b = v['buckets']
    if (!Array.isArray(b) || b.length === 0 || !b.every((x) => isInt(x, 1, 1 << 30))) {
      throw new RangeError(`padding.buckets must be a list of integers >= 1, got ${JSON.stringify(b)}`)
    }
    out.buckets = [...b].sort((x, y) => x - y)
  }
  return out
}

function warmupOf(v: unknown): 'off' | { count: number; sizes?: number[] } {
  if (v === 'off') {
    return 'off'
  }
  if (isObj(v) && isInt(v['count'], 1, 1000) && Object.keys(v).every((k) => k === 'count' || k === 'sizes')) {
    const sizes = v['sizes']
    if (sizes === undefined) {
      return { count: v['count'] }
    }
    if (Array.isArray(sizes) && sizes.length > 0 && sizes.every((x) => isInt(x, 1, 1 << 20))) {
      return { count: v['count'], sizes: sizes }
    }
  }
  throw new RangeError(`warmup must be "off" or {"count": N, "sizes"?: [A, B]}, got ${JSON.stringify(v)}`)
}

/** Versions sorted newest first (numerically). */
export function newestFirst(versions: Iterable<string>): string[] {
  return [...versions].sort((a, b) => (a.length !== b.length ? b.length - a.length : b < a ? -1 : b > a ? 1 : 0))
}

/** The versions of `candidates` the policy serves, newest first. */
export function selectVersions(policy: VersionPolicy, candidates: Iterable<string>): string[] {
  const sorted = newestFirst(candidates)
  if ('all' in policy) {
    return sorted
  }
  if ('specific' in policy) {
    return sorted.filter((v) => policy.specific.includes(v))
  }
  return sorted.slice(0, policy.latest)
}

/** The policy in words, for the index's reasons. */
export function describePolicy(policy: VersionPolicy): string {
  return 'all' in policy ? 'all' : 'specific' in policy ? `specific ${policy.specific.join(', ')}` : `latest ${policy.latest}`
}
