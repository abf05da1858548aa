/**
 * A small Prometheus text-format registry: counters, gauges and histograms with labels.
 * Pure and runtime-agnostic (the gateway runs on edge runtimes too).
 * @module
 */

/** Label values by label name. */
export type Labels = Readonly<Record<string, string>>

/** Buckets (seconds) that resolve sub-millisecond times up to a minute. */
export const DURATION_BUCKETS_S = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
] as const

/** Buckets for batch sizes (items per executed batch). */
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] as const

function labelKey(labels: Labels): string {
  let out = ''
  // Keys in a fixed (sorted) order so {a,b} and {b,a} are one series; most label sets are 1-2 keys.
  const keys = Object.keys(labels)
  if (keys.length > 1) {
    keys.sort()
  }
  for (const k of keys) {
    out += `${out ? ',' : ''}${k}="${escapeLabel(labels[k] ?? '')}"`
  }
  return out
}

const NEEDS_ESCAPE = /[\\\n"]/

function escapeLabel(v: string): string {
  if (!NEEDS_ESCAPE.test(v)) {
    return v
  }
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

function fmt(n: number): string {
  if (n === Infinity) {
    return '+Inf'
  }
  return Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(12)))
}

interface Metric {
  readonly name: string
  render(): string
}

/** A monotonically increasing counter. */
export class Counter implements Metric {
  readonly #values = new Map<string, number>()
  constructor(readonly name: string, readonly help: string) {}

  /** Add `n` (default 1) to the series with these labels. */
  inc(labels: Labels = {}, n = 1): void {
    const k = labelKey(labels)
    this.#values.set(k, (this.#values.get(k) ?? 0) + n)
  }

  /** Current value of one series (0 if never incremented). */
  get(labels: Labels = {}): number {
    return this.#values.get(labelKey(labels)) ?? 0
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`]
    for (const [k, v] of this.#values) {
      lines.push(`${this.name}${k ? `{${k}}` : ''} ${fmt(v)}`)
    }
    return lines.join('\n')
  }
}

/** A value that goes up and down; optionally computed at render time. */
export class Gauge implements Metric {
  readonly #values = new Map<string, number>()
  #collect: (() => Iterable<[Labels, number]>) | undefined
  constructor(readonly name: string, readonly help: string) {}

  /** Set the series with these labels. */
  set(labels: Labels, v: number): void {
    this.#values.set(labelKey(labels), v)
  }

  /** Compute the series at render time instead of storing them. */
  collect(fn: () => Iterable<[Labels, number]>): void {
    this.#collect = fn
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`]
    const values = new Map(this.#values)
    if (this.#collect) {
      for (const [l, v] of this.#collect()) {
        values.set(labelKey(l), v)
      }
    }
    for (const [k, v] of values) {
      lines.push(`${this.name}${k ? `{${k}}` : ''} ${fmt(v)}`)
    }
    return lines.join('\n')
  }
}

interface HistogramSeries {
  counts: number[]
  sum: number
  count: number
}

/** A cumulative histogram. */
export class Histogram implements Metric {
  readonly #series = new Map<string, HistogramSeries>()
  readonly buckets: readonly number[]
  constructor(readonly name: string, readonly help: string, buckets: readonly number[]) {
    this.buckets = [...buckets].sort((a, b) => a - b)
  }

  /** Record one observation. */
  observe(labels: Labels, v: number): void {
    const k = labelKey(labels)
    let s = this.#series.get(k)
    if (!s) {
      s = { counts: new Array<number>(this.buckets.length).fill(0), sum: 0, count: 0 }
      this.#series.set(k, s)
    }
    // Counts are stored per bucket and made cumulative at render time.
    const i = this.buckets.findIndex((b) => v <= b)
    if (i >= 0) {
      s.counts[i] = (s.counts[i] ?? 0) + 1
    }
    s.sum += v
    s.count += 1
  }

  /** Sum and count of one series. */
  get(labels: Labels = {}): { sum: number; count: number } {
    const s = this.#series.get(labelKey(labels))
    return { sum: s?.sum ?? 0, count: s?.count ?? 0 }
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`]
    for (const [k, s] of this.#series) {
      let acc = 0
      const sep = k ? ',' : ''
      this.buckets.forEach((b, i) => {
        acc += s.counts[i] ?? 0
        lines.push(`${this.name}_bucket{${k}${sep}le="${fmt(b)}"} ${acc}`)
      })
      lines.push(`${this.name}_bucket{${k}${sep}le="+Inf"} ${s.count}`)
      lines.push(`${this.name}_sum${k ? `{${k}}` : ''} ${fmt(s.sum)}`)
      lines.push(`${this.name}_count${k ? `{${k}}` : ''} ${s.count}`)
    }
    return lines.join('\n')
  }
}

/** A set of metrics rendered together. Names must be unique. */
export class Registry {
  readonly #metrics = new Map<string, Metric>()

  /** Get or create a counter. */
  counter(name: string, help: string): Counter {
    return this.#getOrAdd(name, () => new Counter(name, help), Counter)
  }

  /** Get or create a gauge. */
  gauge(name: string, help: string): Gauge {
    return this.#getOrAdd(name, () => new Gauge(name, help), Gauge)
  }

  /** Get or create a histogram. */
  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.#getOrAdd(name, () => new Histogram(name, help, buckets), Histogram)
  }

  /** Prometheus text exposition format 0.0.4. */
  render(): string {
    return [...this.#metrics.values()].map((m) => m.render()).join('\n') + '\n'
  }

  #getOrAdd<M extends Metric>(name: string, make: () => M, cls: abstract new (...a: never[]) => M): M {
    const m = this.#metrics.get(name)
    if (m) {
      if (!(m instanceof cls)) {
        throw new TypeError(`metric ${name} already registered with another type`)
      }
      return m
    }
    const created = make()
    this.#metrics.set(name, created)
    return created
  }
}

/** Content type of {@link Registry.render}. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/** Parse Prometheus text into `name{labels}` -> value (for tests and the bench). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) {
      continue
    }
    const sp = line.lastIndexOf(' ')
    out.set(line.slice(0, sp), Number(line.slice(sp + 1).replace('+Inf', 'Infinity')))
  }
  return out
}
