// Keeps docs/metrics.md in step with the metrics the gateway and the worker register (both
// directions, with their types), checks Prometheus naming, and checks the Triton mapping table.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { Registry } from './registry.ts'
import { gatewayMetrics, generateMetrics, ortMetrics, workerMetrics } from './cohort-metrics.ts'
import { runtimeMetrics, type RuntimeSource } from './runtime-metrics.ts'

/** A source with every optional reading, so that every runtime metric registers. */
const FULL_SOURCE: RuntimeSource = {
  cpu: () => ({ user: 1, system: 1 }),
  memory: () => ({ rss: 1, heapTotal: 1, heapUsed: 1, external: 1 }),
  startTimeS: 1,
  version: 'v20.0.0',
  eventLoopLag: () => ({ mean: 0, p50: 0, p99: 0, max: 0 }),
  onGc: () => undefined,
}

/** Metrics named by the Prometheus conventions and prom-client rather than by Cohort. */
const RUNTIME_PREFIX = /^(process|nodejs)_/

const DOC_URL = new URL('../../../docs/metrics.md', import.meta.url)
const doc = readFileSync(DOC_URL, 'utf8')

/** Split a Markdown table row into trimmed cells (the doc uses no escaped pipes). */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim())
}

/** Body rows (cells) of every table whose header row is `header`, with 1-based line numbers. */
function table(md: string, header: string[]): { c: string[]; line: number }[] {
  const lines = md.split('\n')
  const starts = lines.flatMap((l, i) => (l.trim().startsWith('|') && cells(l).join('|') === header.join('|') ? [i] : []))
  if (starts.length === 0) {
    throw new Error(`docs/metrics.md has no table with header | ${header.join(' | ')} |`)
  }
  const rows: { c: string[]; line: number }[] = []
  for (const start of starts) {
    for (let i = start + 1; i < lines.length && lines[i]!.trim().startsWith('|'); i++) {
      const c = cells(lines[i]!)
      if (c.every((x) => /^:?-+:?$/.test(x))) {
        continue // separator
      }
      rows.push({ c, line: i + 1 })
    }
  }
  return rows
}

/** The `code` spans of a cell. */
function codes(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)
}

/** name -> type as documented in the main table. */
function documented(): Map<string, string> {
  const out = new Map<string, string>()
  for (const { c, line } of table(doc, ['name', 'type', 'labels', 'meaning'])) {
    const names = codes(c[0] ?? '')
    if (names.length !== 1) {
      throw new Error(`docs/metrics.md line ${line}: first cell must be one \`metric_name\`, got ${JSON.stringify(c[0])}`)
    }
    if (out.has(names[0]!)) {
      throw new Error(`docs/metrics.md line ${line}: ${names[0]} is documented twice`)
    }
    out.set(names[0]!, c[1] ?? '')
  }
  return out
}

/** name -> type of what `gatewayMetrics`, `workerMetrics`, `ortMetrics`, `generateMetrics` and `runtimeMetrics` register. */
function registered(): Map<string, string> {
  const out = new Map<string, string>()
  for (const make of [gatewayMetrics, workerMetrics, ortMetrics, generateMetrics, (r: Registry) => runtimeMetrics(r, FULL_SOURCE)]) {
    const r = new Registry()
    make(r)
    for (const f of r.collect()) {
      out.set(f.name, f.type)
    }
  }
  return out
}

describe('metric names', () => {
  const docs = documented()
  const code = registered()

  it('documents exactly the metrics the gateway and the worker register, with their types', () => {
    expect(code.size).toBeGreaterThan(5)
    const undocumented = [...code.keys()].filter((n) => !docs.has(n))
    const unregistered = [...docs.keys()].filter((n) => !code.has(n))
    expect(undocumented, 'registered but missing from docs/metrics.md').toEqual([])
    expect(unregistered, 'in docs/metrics.md but registered by nobody').toEqual([])
    for (const [name, type] of code) {
      expect(docs.get(name), `type of ${name}`).toBe(type)
    }
  })

  it('registers the process and runtime metrics under the names prom-client gives them', () => {
    for (const [name, type] of [
      ['process_cpu_seconds_total', 'counter'],
      ['process_cpu_user_seconds_total', 'counter'],
      ['process_cpu_system_seconds_total', 'counter'],
      ['process_resident_memory_bytes', 'gauge'],
      ['process_start_time_seconds', 'gauge'],
      ['nodejs_eventloop_lag_seconds', 'gauge'],
      ['nodejs_heap_size_total_bytes', 'gauge'],
      ['nodejs_heap_size_used_bytes', 'gauge'],
      ['nodejs_external_memory_bytes', 'gauge'],
      ['nodejs_gc_duration_seconds', 'histogram'],
    ]) {
      expect(code.get(name!), name).toBe(type)
    }
  })

  it('follows Prometheus naming: cohort_ (or process_/nodejs_) snake_case, _total on counters only, base units in seconds', () => {
    for (const [name, type] of code) {
      expect(name, name).toMatch(/^(cohort|process|nodejs)_[a-z][a-z0-9]*(_[a-z0-9]+)*$/)
      expect(name.endsWith('_total'), `${name} (${type}): counters and only counters end in _total`).toBe(type === 'counter')
      expect(name, `${name}: base units (seconds), not ms/us/minutes`).not.toMatch(/_(ms|us|ns|millis|milliseconds|microseconds|nanoseconds|minutes|hours)(_|$)/)
      if (/(duration|latency|time)/.test(name)) {
        expect(name, `${name}: a duration is in _seconds`).toMatch(/_seconds(_total)?$/)
      }
      // Histogram and summary suffixes belong to the exposition, never to the name.
      expect(name, name).not.toMatch(/_(bucket|sum|count)$/)
    }
  })

  it('maps every documented metric to its Triton counterpart, or says there is none', () => {
    const rows = table(doc, ['cohort', 'triton', 'difference'])
    const mapped = new Map<string, string[]>()
    for (const { c, line } of rows) {
      const triton = c[1] === '—' ? [] : codes(c[1] ?? '')
      if (c[1] !== '—') {
        expect(triton.length, `docs/metrics.md line ${line}: triton cell is \`nv_...\` names or —`).toBeGreaterThan(0)
      }
      for (const t of triton) {
        expect(t, `docs/metrics.md line ${line}`).toMatch(/^nv_[a-z0-9_]+$/)
      }
      expect((c[2] ?? '').length, `docs/metrics.md line ${line}: say how they differ`).toBeGreaterThan(0)
      for (const n of codes(c[0] ?? '')) {
        expect(docs.has(n), `docs/metrics.md line ${line}: ${n} is not a documented metric`).toBe(true)
        expect(mapped.has(n), `docs/metrics.md line ${line}: ${n} mapped twice`).toBe(false)
        mapped.set(n, triton)
      }
    }
    expect(
      [...docs.keys()].filter((n) => !mapped.has(n) && !RUNTIME_PREFIX.test(n)),
      'documented Cohort metrics missing from the Triton table',
    ).toEqual([])
    // Triton's core per-model metrics each have a Cohort counterpart.
    const covered = new Set([...mapped.values()].flat())
    for (const t of [
      'nv_inference_request_success',
      'nv_inference_request_failure',
      'nv_inference_count',
      'nv_inference_exec_count',
      'nv_inference_request_duration_us',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_pending_request_count',
    ]) {
      expect(covered.has(t), `no Cohort metric maps to ${t}`).toBe(true)
    }
  })
})
