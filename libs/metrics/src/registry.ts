/**
 * A small Prometheus text-format registry: counters, gauges and histograms with labels.
 * Pure and runtime-agnostic (the gateway runs on edge runtimes too).
 * @module
 */

/** Label values by label name. */
export type Labels = Readonly<Record<string, string>>

/** Buckets (seconds) that resolve sub-millisecond times up to a minute. */
export const DURATION_BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const

/** Buckets for batch sizes (items per executed batch). */
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] as const

/** Keys of frozen label sets, computed once (a frozen object cannot change under its key). */
const FROZEN_KEYS = new WeakMap<Labels, string>()

/**
 * The series key of `labels`. A frozen label set (`Object.freeze`, what {@link frozenLabels} makes)
 * is keyed once and looked up after: code that counts per request keeps its label sets frozen, so
 * a count builds and sorts no key.
 */
function labelKey(labels: Labels): string {
  const held = FROZEN_KEYS.get(labels)
  if (held !== undefined) {
    return held
  }
  const key = buildKey(labels)
  if (Object.isFrozen(labels)) {
    FROZEN_KEYS.set(labels, key)
  }
  return key
}

/**
 * Frozen label sets of `base` plus one label `name`, one per value, made once each (a per-request
 * count's labels without a new object or key per call). Unbounded values belong in no label: the
 * caller bounds them (as tenant labels are).
 */
export function frozenLabels(base: Labels, name: string): (value: string) => Labels {
  const made = new Map<string, Labels>()
  return (value) => {
    let l = made.get(value)
    if (l === undefined) {
      l = Object.freeze({ ...base, [name]: value })
      made.set(value, l)
    }
    return l
  }
}

function buildKey(labels: Labels): string {
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

/** One series of a counter or gauge in {@link Registry.collect}. */
export interface Sample {
  labels: Labels
  value: number
}

/** One series of a histogram in {@link Registry.collect}: cumulative bucket counts (last `le` is `Infinity`). */
export interface HistogramSample {
  labels: Labels
  buckets: { le: number; count: number }[]
  sum: number
  count: number
}

/** One metric and its series, as {@link Registry.collect} returns it (what `/metrics` renders). */
export type MetricFamily =
  | { name: string; help: string; type: 'counter' | 'gauge'; samples: Sample[] }
  | { name: string; help: string; type: 'histogram'; samples: HistogramSample[] }

interface Metric {
  readonly name: string
  family(): MetricFamily
}

type Collector = () => Iterable<readonly [Labels, number]>

/** Stored series plus series computed by collectors at collect time (a collector's win on a clash). */
function scalarSamples(values: Map<string, { labels: Labels; value: number }>, collectors: readonly Collector[]): Sample[] {
  const out = new Map(values)
  for (const fn of collectors) {
    for (const [labels, value] of fn()) {
      out.set(labelKey(labels), { labels, value })
    }
  }
  return [...out.values()].map((s) => ({ labels: s.labels, value: s.value }))
}

/** A monotonically increasing counter; optionally computed at collect time (e.g. CPU seconds). */
export class Counter implements Metric {
  readonly #values = new Map<string, { labels: Labels; value: number }>()
  readonly #collectors: Collector[] = []
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /** Add `n` (default 1) to the series with these labels. */
  inc(labels: Labels = {}, n = 1): void {
    const k = labelKey(labels)
    const s = this.#values.get(k)
    if (s) {
      s.value += n
    } else {
      this.#values.set(k, { labels: { ...labels }, value: n })
    }
  }

  /** Current value of one stored series (0 if never incremented). */
  get(labels: Labels = {}): number {
    return this.#values.get(labelKey(labels))?.value ?? 0
  }

  /** Add series computed at collect time (the source must only grow). Collectors add up, they never replace. */
  collect(fn: Collector): void {
    this.#collectors.push(fn)
  }

  family(): MetricFamily {
    return { name: this.name, help: this.help, type: 'counter', samples: scalarSamples(this.#values, this.#collectors) }
  }

  render(): string {
    return renderFamily(this.family())
  }
}

/** A value that goes up and down; optionally computed at collect time. */
export class Gauge implements Metric {
  readonly #values = new Map<string, { labels: Labels; value: number }>()
  readonly #collectors: Collector[] = []
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /** Set the series with these labels. */
  set(labels: Labels, v: number): void {
    this.#values.set(labelKey(labels), { labels: { ...labels }, value: v })
  }

  /**
   * Add series computed at collect time instead of stored. Several collectors add up (a worker
   * and a pipeline in one process each report their own models); none replaces another.
   */
  collect(fn: Collector): void {
    this.#collectors.push(fn)
  }

  family(): MetricFamily {
    return { name: this.name, help: this.help, type: 'gauge', samples: scalarSamples(this.#values, this.#collectors) }
  }

  render(): string {
    return renderFamily(this.family())
  }
}

interface HistogramSeries {
  labels: Labels
  counts: number[]
  sum: number
  count: number
}

/** A cumulative histogram. */
export class Histogram implements Metric {
  readonly #series = new Map<string, HistogramSeries>()
  readonly buckets: readonly number[]
  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
  ) {
    this.buckets = [...buckets].sort((a, b) => a - b)
  }

  /** Record one observation. */
  observe(labels: Labels, v: number): void {
    const k = labelKey(labels)
    let s = this.#series.get(k)
    if (!s) {
      s = { labels: { ...labels }, counts: new Array<number>(this.buckets.length).fill(0), sum: 0, count: 0 }
      this.#series.set(k, s)
    }
    // Counts are stored per bucket and made cumulative at collect time.
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

  family(): MetricFamily {
    const samples: HistogramSample[] = []
    for (const s of this.#series.values()) {
      let acc = 0
      const buckets = this.buckets.map((le, i) => {
        acc += s.counts[i] ?? 0
        return { le, count: acc }
      })
      buckets.push({ le: Infinity, count: s.count })
      samples.push({ labels: s.labels, buckets, sum: s.sum, count: s.count })
    }
    return { name: this.name, help: this.help, type: 'histogram', samples }
  }

  render(): string {
    return renderFamily(this.family())
  }
}

/** One family in the Prometheus text exposition format 0.0.4 (no trailing newline). */
export function renderFamily(f: MetricFamily): string {
  const lines = [`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`]
  if (f.type === 'histogram') {
    for (const s of f.samples) {
      const k = labelKey(s.labels)
      const sep = k ? ',' : ''
      for (const b of s.buckets) {
        lines.push(`${f.name}_bucket{${k}${sep}le="${fmt(b.le)}"} ${b.count}`)
      }
      lines.push(`${f.name}_sum${k ? `{${k}}` : ''} ${fmt(s.sum)}`)
      lines.push(`${f.name}_count${k ? `{${k}}` : ''} ${s.count}`)
    }
  } else {
    for (const s of f.samples) {
      const k = labelKey(s.labels)
      lines.push(`${f.name}${k ? `{${k}}` : ''} ${fmt(s.value)}`)
    }
  }
  return lines.join('\n')
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

  /**
   * Every metric with its current series (collectors run now), in registration order: what
   * {@link render} writes, as data (the dashboard reads this rather than parsing the text back).
   */
  collect(): MetricFamily[] {
    return [...this.#metrics.values()].map((m) => m.family())
  }

  /** Prometheus text exposition format 0.0.4. */
  render(): string {
    return renderFamilies(this.collect())
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

/** Families in the Prometheus text exposition format 0.0.4 (with the final newline). */
export function renderFamilies(families: readonly MetricFamily[]): string {
  return families.map(renderFamily).join('\n') + '\n'
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
