import type { WorkerMetrics } from '@cohort/metrics'
import type { Logger } from '@cohort/observability'
import type { RunnerEvents } from './runners/types.ts'

/** A runner's restart events as metrics (`cohort_runner_restarts_total`) and log lines. */
export function runnerEvents(model: string, workerId: string, metrics: WorkerMetrics, log: Logger): RunnerEvents {
  return {
    restarting(reason, detail) {
      metrics.restarts.inc({ model, reason })
      log.error({ model, workerId, reason, detail }, 'runner restarting')
    },
    restarted(reason, ms) {
      log.info({ model, workerId, reason, ms: Math.round(ms) }, 'runner restarted')
    },
    restartFailed(reason, err, retryMs) {
      log.error({ model, workerId, reason, err, retryMs }, 'runner restart failed; trying again')
    },
  }
}
