import { Registry, runtimeMetrics } from '@cohort/metrics'
import { nodeRuntimeSource } from '@cohort/worker'

/** The Node entries sample the dashboard's history every second (the last 5 minutes at its default 300 samples). */
export const DASHBOARD_SAMPLE_MS = 1000

/**
 * A metrics registry for one `cohort` process, holding the process and runtime metrics
 * (`process_*`, `nodejs_*`; see docs/metrics.md). One per process: the embedded `serve` shares it
 * between gateway and worker. The source's timer and GC observer live as long as the process and
 * never keep it alive.
 */
export function processRegistry(): Registry {
  const r = new Registry()
  runtimeMetrics(r, nodeRuntimeSource())
  return r
}
