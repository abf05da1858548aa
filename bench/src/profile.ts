import { readFileSync, readdirSync } from 'node:fs'
import { basename, join } from 'node:path'

interface CpuProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}

interface CpuProfile {
  nodes: CpuProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** One function's self time in a profile. */
export interface SelfTimeEntry {
  name: string
  selfMs: number
  percent: number
}

/** Self-time summary of one `.cpuprofile` (one thread of one process). */
export interface ProfileSummary {
  file: string
  totalMs: number
  top: SelfTimeEntry[]
}

function frameName(n: CpuProfileNode): string {
  const f = n.callFrame
  const fn = f.functionName || '(anonymous)'
  if (!f.url) {
    return fn
  }
  const url = f.url.replace(/^file:\/\//, '')
  const short = url.includes('node_modules') ? url.slice(url.lastIndexOf('node_modules') + 13) : basename(url)
  return `${fn} ${short}:${f.lineNumber + 1}`
}

/** Top `n` self-time functions of a V8 `.cpuprofile` file. */
export function summariseProfile(file: string, n = 12): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map((x) => [x.id, x]))
  const self = new Map<string, number>()
  let total = 0
  p.samples.forEach((id, i) => {
    const us = p.timeDeltas[i] ?? 0
    const nodeOf = byId.get(id)
    const key = nodeOf ? frameName(nodeOf) : '(unknown)'
    self.set(key, (self.get(key) ?? 0) + us)
    total += us
  })
  const top = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, selfMs: us / 1000, percent: total ? (100 * us) / total : 0 }))
  return { file, totalMs: total / 1000, top }
}

/** Summaries of every `.cpuprofile` in `dir`, busiest first. */
export function summariseProfiles(dir: string, n = 12): ProfileSummary[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => summariseProfile(join(dir, f), n))
    .sort((a, b) => b.totalMs - a.totalMs)
}

/** Print profile summaries as plain text. */
export function printProfiles(title: string, summaries: ProfileSummary[]): void {
  console.log(`\n${title}`)
  for (const s of summaries) {
    console.log(`  ${basename(s.file)}  (${(s.totalMs / 1000).toFixed(1)} s sampled)`)
    for (const e of s.top) {
      console.log(`    ${e.percent.toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(7)} ms  ${e.name}`)
    }
  }
}

/** Buckets of the "where the time goes" table (docs/benchmarks.md#serving-tax). */
const CATEGORIES: [string, RegExp][] = [
  [
    'startup (module loading, excluded)',
    /loader|hooks:|tsx\/|source_map|lexer|compileSourceTextModule|compileForInternalLoader|wrapSafe|realm:|package_json|resolve:|node:path|url:|internalModuleStat|openFileHandle|fstat|realpathSync|readFileUtf8|^read$|^close$|^access$/,
  ],
  ['socket writes (syscalls)', /^writeBuffer|^writev|writevGeneric|writeGeneric|afterWriteDispatched|onwrite writable|stream_base_commons/],
  ['garbage collector', /garbage collector/],
  ['ORT hand-off (worker thread messages)', /postMessage|receiveMessageOnPort|ort-host|onnxruntime|handleMessage worker/],
  ['NATS client (nats.js)', /@nats-io\//],
  ['msgpack', /msgpackr\//],
  ['HTTP (node:http, Hono)', /_http_|@hono\/|hono\/dist|node-adapter|parserOn|^parse$/],
  ['JSON (OIP parse and answer)', /json-exact|oip\.ts|tensor-data|JSON/],
  ['Cohort gateway', /upstream\.ts|packer\.ts|liveness\.ts|routes\/|infer\.ts|observe|app\.ts|deadline|body\.ts/],
  ['Cohort worker and batching', /model-server|reply\.ts|engine|queue\.ts|batching|runners\/|infer-stats|tracing\.ts|policy/],
  ['Cohort transport and protocol', /nats\.ts|transport\/src\/nats\/|in-process|async-queue|consume|codec|envelope|reconnect-guard/],
  ['timers, promises, events', /timers|task_queues|runMicrotasks|node:events|abort_controller|async_hooks|promise/i],
]

/** Self time of one `.cpuprofile` by {@link CATEGORIES}, idle and startup left out; shares of the rest. */
export function categoriseProfile(file: string): { busyMs: number; rows: { category: string; ms: number; share: number }[] } {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map((x) => [x.id, x]))
  const acc = new Map<string, number>()
  let busy = 0
  p.samples.forEach((id, i) => {
    const n = byId.get(id)
    const name = n ? frameName(n) : '(unknown)'
    if (name === '(idle)' || name === '(program)') {
      return
    }
    const cat = CATEGORIES.find(([, re]) => re.test(name))?.[0] ?? 'other'
    if (cat.startsWith('startup')) {
      return
    }
    const us = p.timeDeltas[i] ?? 0
    acc.set(cat, (acc.get(cat) ?? 0) + us)
    busy += us
  })
  const rows = [...acc.entries()].sort((a, b) => b[1] - a[1]).map(([category, us]) => ({ category, ms: us / 1000, share: busy ? us / busy : 0 }))
  return { busyMs: busy / 1000, rows }
}
