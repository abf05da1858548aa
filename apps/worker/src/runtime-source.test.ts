// The Node runtime source against this very process: real CPU time, memory, event-loop delay and
// garbage collections, through `runtimeMetrics` into a registry.
import { describe, expect, it } from 'vitest'
import { Registry, parsePrometheus, runtimeMetrics } from '@cohort/metrics'
import { nodeRuntimeSource } from './runtime-source.ts'

describe('nodeRuntimeSource', () => {
  it('reports this process: CPU that grows, RSS, start time, heap, event-loop delay and GC pauses', async () => {
    const source = nodeRuntimeSource({ windowMs: 60_000, resolutionMs: 5 })
    try {
      const r = new Registry()
      runtimeMetrics(r, source)
      // The delay monitor needs a few ticks of its own before it measures a delay.
      await new Promise((res) => setTimeout(res, 50))
      const before = parsePrometheus(r.render())
      // Burn CPU and allocate enough short-lived garbage for young-generation collections.
      const until = performance.now() + 150
      let keep = 0
      while (performance.now() < until) {
        keep += new Array(10_000).fill(keep % 7).length
      }
      // Let the event-loop monitor and the GC observer (asynchronous) report.
      await new Promise((res) => setTimeout(res, 250))
      const after = parsePrometheus(r.render())
      expect(after.get('process_cpu_seconds_total')!).toBeGreaterThan(before.get('process_cpu_seconds_total')!)
      expect(after.get('process_resident_memory_bytes')!).toBeGreaterThan(10 * 1024 * 1024)
      const start = after.get('process_start_time_seconds')!
      expect(start).toBeLessThanOrEqual(Date.now() / 1000)
      expect(start).toBeGreaterThan(Date.now() / 1000 - process.uptime() - 5)
      expect(after.get('nodejs_heap_size_used_bytes')!).toBeGreaterThan(0)
      expect(after.get('nodejs_heap_size_total_bytes')!).toBeGreaterThanOrEqual(after.get('nodejs_heap_size_used_bytes')!)
      // The 150 ms busy loop blocked the loop: the (first, still open) window's largest delay shows it.
      expect(after.get('nodejs_eventloop_lag_max_seconds')!).toBeGreaterThan(0.05)
      const gcs = [...after].filter(([k]) => k.startsWith('nodejs_gc_duration_seconds_count')).reduce((a, [, v]) => a + v, 0)
      expect(gcs, 'garbage collections observed').toBeGreaterThan(0)
      expect(keep).toBeGreaterThan(0)
    } finally {
      source.close()
      source.close()
    }
  })
})
