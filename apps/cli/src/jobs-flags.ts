import type { NatsConnection } from '@nats-io/nats-core'
import { createNatsJobQueue, type JobQueue } from '@cohort/transport'
import type { WorkerJobOptions } from '@cohort/worker'
import type { WebhookOptions } from '@cohort/predictions'
import { intFlag } from './args.ts'
import { subjectPrefix } from './prefix-flags.ts'
import { recordOptions, storeOptions } from './reliability-flags.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** Webhook delivery flags (serve, gateway, worker, bridge redis): whoever sends a prediction's webhooks. */
export const WEBHOOK_OPTIONS = {
  'webhook-attempts': { type: 'string' },
  'webhook-initial-delay-ms': { type: 'string' },
  'webhook-max-delay-ms': { type: 'string' },
  'webhook-timeout-ms': { type: 'string' },
} as const

export const WEBHOOK_HELP = `  --webhook-attempts N   attempts per webhook event, the first included (default 6)
  --webhook-initial-delay-ms MS
                         wait before the first retry, doubled after each failure (default 500)
  --webhook-max-delay-ms MS
                         longest wait between attempts (default 30000)
  --webhook-timeout-ms MS
                         per-attempt timeout (default 10000)`

/** Flags of the Cog-style prediction routes (serve, gateway). */
export const PREDICTION_OPTIONS = {
  'default-model': { type: 'string' },
  'max-bulk-inputs': { type: 'string' },
  ...WEBHOOK_OPTIONS,
} as const

/** Flags of async prediction jobs on workers (serve, worker). */
export const JOB_OPTIONS = {
  'job-ack-wait-ms': { type: 'string' },
  'job-max-deliver': { type: 'string' },
  ...WEBHOOK_OPTIONS,
} as const

/** Webhook retry settings from the flags; undefined when none is given. */
export function webhookOptions(v: Values): WebhookOptions | undefined {
  const maxAttempts = intFlag('webhook-attempts', v['webhook-attempts'])
  const initialDelayMs = intFlag('webhook-initial-delay-ms', v['webhook-initial-delay-ms'], 0)
  const maxDelayMs = intFlag('webhook-max-delay-ms', v['webhook-max-delay-ms'], 0)
  const timeoutMs = intFlag('webhook-timeout-ms', v['webhook-timeout-ms'])
  const o: WebhookOptions = {
    ...(maxAttempts !== undefined ? { maxAttempts } : {}),
    ...(initialDelayMs !== undefined ? { initialDelayMs } : {}),
    ...(maxDelayMs !== undefined ? { maxDelayMs } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  }
  return Object.keys(o).length > 0 ? o : undefined
}

export const PREDICTION_HELP = `  --default-model NAME   model answered at /predictions (default: the first served, by name)
  --max-bulk-inputs N    most inputs of one bulk request; more is 413 (default 1000)`

export const JOB_HELP = `  --job-ack-wait-ms MS   async prediction jobs (NATS JetStream): redeliver a job whose worker died after
                         this long (default 30000; set when the job consumer is first created)
  --job-max-deliver N    deliveries of one job that may run it; the next one records it failed
                         (default 10)`

/** `defaultModel`, `maxBulkInputs` and webhook settings for createApp. */
export function predictionOptions(v: Values): { defaultModel?: string; maxBulkInputs?: number; predictions?: { webhooks: WebhookOptions } } {
  const maxBulkInputs = intFlag('max-bulk-inputs', v['max-bulk-inputs'])
  const webhooks = webhookOptions(v)
  return {
    ...(typeof v['default-model'] === 'string' ? { defaultModel: v['default-model'] } : {}),
    ...(maxBulkInputs ? { maxBulkInputs } : {}),
    ...(webhooks ? { predictions: { webhooks } } : {}),
  }
}

/** The JetStream job queue on a NATS connection (its operations fail with 503 JOBS_UNAVAILABLE without JetStream). */
export function jobQueue(nc: NatsConnection, replicas: number | undefined, v: Values = {}): JobQueue {
  const maxDeliver = intFlag('job-max-deliver', v['job-max-deliver'])
  const prefix = subjectPrefix(v)
  return createNatsJobQueue(nc, { ...(replicas ? { replicas } : {}), ...(maxDeliver ? { maxDeliver } : {}), ...(prefix ? { prefix } : {}), ...recordOptions(v) })
}

/** Worker-side job options from the flags. */
export function workerJobs(v: Values, queue: JobQueue): WorkerJobOptions {
  const ackWaitMs = intFlag('job-ack-wait-ms', v['job-ack-wait-ms'])
  const webhooks = webhookOptions(v)
  return { queue, ...(ackWaitMs ? { ackWaitMs } : {}), ...(webhooks ? { webhooks } : {}), ...storeOptions(v) }
}
