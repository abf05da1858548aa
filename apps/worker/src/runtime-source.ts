/**
 * The Node.js {@link RuntimeSource} for `runtimeMetrics` (libs/metrics stays pure): CPU and memory
 * from `process`, event-loop delay from `perf_hooks.monitorEventLoopDelay` in windows of
 * `windowMs`, and garbage collections from a `PerformanceObserver` on `gc` entries. Used by the
 * gateway and worker processes the CLI starts.
 * @module
 */
import { PerformanceObserver, constants, monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import type { EventLoopLag, RuntimeSource } from '@cohort/metrics'

/** Options of {@link nodeRuntimeSource}. */
export interface NodeRuntimeOptions {
  /** Event-loop delay is reported over windows of this length (the last complete one). @default 5000 */
  windowMs?: number
  /** Sampling resolution of the event-loop delay monitor, ms. @default 10 */
  resolutionMs?: number
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
}

/** A Node runtime source plus an idempotent `close()` (stops the monitor, the timer and the observer). */
export interface NodeRuntimeSource extends RuntimeSource {
  close(): void
}

/** Read this process. Timers are unref'd: the source never keeps a process alive. */
export function nodeRuntimeSource(o: NodeRuntimeOptions = {}): NodeRuntimeSource {
  const windowMs = o.windowMs ?? 5_000
  const monitor: IntervalHistogram = monitorEventLoopDelay({ resolution: o.resolutionMs ?? 10 })
  monitor.enable()
  const read = (): EventLoopLag | undefined =>
    monitor.count > 0 ? { mean: monitor.mean / 1e9, p50: monitor.percentile(50) / 1e9, p99: monitor.percentile(99) / 1e9, max: monitor.max / 1e9 } : undefined
  let last: EventLoopLag | undefined
  // Windows rather than reset-on-scrape, so that Prometheus and the dashboard sampler do not reset
  // each other's readings.
  const timer = setInterval(() => {
    last = read() ?? last
    monitor.reset()
  }, windowMs)
  timer.unref()
  const observers: PerformanceObserver[] = []
  let closed = false
  return {
    cpu() {
      const u = process.cpuUsage()
      return { user: u.user / 1e6, system: u.system / 1e6 }
    },
    memory() {
      const m = process.memoryUsage()
      return { rss: m.rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external }
    },
    startTimeS: Date.now() / 1000 - process.uptime(),
    version: process.version,
    eventLoopLag: () => last ?? read(),
    onGc(fn) {
      if (closed) {
        return
      }
      const obs = new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          const kind = (e as { detail?: { kind?: number } }).detail?.kind
          fn(GC_KINDS[kind ?? -1] ?? 'unknown', e.duration / 1000)
        }
      })
      obs.observe({ entryTypes: ['gc'] })
      observers.push(obs)
    },
    close() {
      if (closed) {
        return
      }
      closed = true
      clearInterval(timer)
      monitor.disable()
      for (const obs of observers) {
        obs.disconnect()
      }
    },
  }
}
