/**
 * Process and runtime metrics under the names Prometheus' client libraries use (`process_*` from
 * the Prometheus conventions, `nodejs_*` as prom-client names them), read from a
 * {@link RuntimeSource} that the app supplies: this module stays pure (no `node:` imports), the
 * Node collector lives in the apps (`apps/worker/src/runtime-source.ts`). See docs/metrics.md.
 * @module
 */
import type { Registry } from './registry.ts'

/** prom-client's buckets for `nodejs_gc_duration_seconds`. */
export const GC_BUCKETS_S = [0.001, 0.01, 0.1, 1, 2, 5] as const

/** Event-loop delay over the source's last window, seconds. */
export interface EventLoopLag {
  mean: number
  p50: number
  p99: number
  max: number
}

/** What a runtime can tell about its process. Every reading is optional but `cpu` and `memory`. */
export interface RuntimeSource {
  /** CPU time used by the process since it started, seconds. */
  cpu(): { user: number; system: number }
  /** Memory now, bytes (`heapTotal`/`heapUsed`/`external` of the main isolate). */
  memory(): { rss: number; heapTotal: number; heapUsed: number; external: number }
  /** When the process started, seconds since the epoch. */
  startTimeS: number
  /** The runtime's version (e.g. `v20.19.0`), for `nodejs_version_info`. */
  version?: string
  /** Event-loop delay (undefined before the first measurement). */
  eventLoopLag?(): EventLoopLag | undefined
  /** Subscribe to garbage collections: `kind` is `major`, `minor`, `incremental` or `weakcb`. */
  onGc?(fn: (kind: string, seconds: number) => void): void
}

/** Register the process and runtime metrics of `source` in `r`. Returns the GC histogram. */
export function runtimeMetrics(r: Registry, source: RuntimeSource) {
  const user = r.counter('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.')
  const system = r.counter('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.')
  const cpu = r.counter('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.')
  user.collect(() => [[{}, source.cpu().user]])
  system.collect(() => [[{}, source.cpu().system]])
  cpu.collect(() => {
    const c = source.cpu()
    return [[{}, c.user + c.system]]
  })
  r.gauge('process_resident_memory_bytes', 'Resident memory size in bytes.').collect(() => [[{}, source.memory().rss]])
  r.gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.').collect(() => [[{}, Math.round(source.startTimeS)]])
  r.gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.').collect(() => [[{}, source.memory().heapTotal]])
  r.gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.').collect(() => [[{}, source.memory().heapUsed]])
  r.gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.').collect(() => [[{}, source.memory().external]])
  if (source.version) {
    const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(source.version)
    const labels = { version: source.version, major: m?.[1] ?? '', minor: m?.[2] ?? '', patch: m?.[3] ?? '' }
    r.gauge('nodejs_version_info', 'Node.js version info.').set(labels, 1)
  }
  const lag = source.eventLoopLag?.bind(source)
  if (lag) {
    const g = (name: string, help: string, pick: (l: EventLoopLag) => number) =>
      r.gauge(name, help).collect(() => {
        const l = lag()
        return l ? [[{}, pick(l)]] : []
      })
    g('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds (mean delay over the last window).', (l) => l.mean)
    g('nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.', (l) => l.p50)
    g('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the recorded event loop delays.', (l) => l.p99)
    g('nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.', (l) => l.max)
  }
  const gc = r.histogram('nodejs_gc_duration_seconds', 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.', GC_BUCKETS_S)
  source.onGc?.((kind, seconds) => gc.observe({ kind }, seconds))
  return { gc }
}
