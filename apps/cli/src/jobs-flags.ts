import type { NatsConnection } from '@nats-io/nats-core'
import { createNatsJobQueue, type JobQueue } from '@cohort/transport'
import type { WorkerJobOptions } from '@cohort/worker'
import { intFlag } from './args.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** Flags of the Cog-style prediction routes (serve, gateway). */
export const PREDICTION_OPTIONS = {
  'default-model': { type: 'string' },
  'max-bulk-inputs': { type: 'string' },
} as const

/** Flags of async prediction jobs on workers (serve, worker). */
export const JOB_OPTIONS = {
  'job-ack-wait-ms': { type: 'string' },
  'job-max-deliver': { type: 'string' },
} as const

export const PREDICTION_HELP = `  --default-model NAME   model answered at /predictions (default: the first served, by name)
  --max-bulk-inputs N    most inputs of one bulk request; more is 413 (default 1000)`

export const JOB_HELP = `  --job-ack-wait-ms MS   async prediction jobs (NATS JetStream): redeliver a job whose worker died after
                         this long (default 30000; set when the job consumer is first created)
  --job-max-deliver N    runs of one job before it is recorded failed (default 10; set when the job
                         consumer is first created)`

/** `defaultModel` for createApp. */
export function predictionOptions(v: Values): { defaultModel?: string; maxBulkInputs?: number } {
  const maxBulkInputs = intFlag('max-bulk-inputs', v['max-bulk-inputs'])
  return {
    ...(typeof v['default-model'] === 'string' ? { defaultModel: v['default-model'] } : {}),
    ...(maxBulkInputs ? { maxBulkInputs } : {}),
  }
}

/** The JetStream job queue on a NATS connection (its operations fail with 503 JOBS_UNAVAILABLE without JetStream). */
export function jobQueue(nc: NatsConnection, replicas: number | undefined, v: Values = {}): JobQueue {
  const maxDeliver = intFlag('job-max-deliver', v['job-max-deliver'])
  return createNatsJobQueue(nc, { ...(replicas ? { replicas } : {}), ...(maxDeliver ? { maxDeliver } : {}) })
}

/** Worker-side job options from the flags. */
export function workerJobs(v: Values, queue: JobQueue): WorkerJobOptions {
  const ackWaitMs = intFlag('job-ack-wait-ms', v['job-ack-wait-ms'])
  return { queue, ...(ackWaitMs ? { ackWaitMs } : {}) }
}
