/**
 * The knob tables of Cog-style predictions, async jobs and webhook delivery (serve, gateway,
 * worker, bridge redis): one row per flag ({@link knobs.ts}), each default the constant of the
 * library that applies it (only given values are passed on, {@link knobGiven}).
 * @module
 */
import type { NatsConnection } from '@nats-io/nats-core'
import { DEFAULT_MAX_BULK_INPUTS } from '@cohort/gateway'
import { DEFAULT_JOB_MAX_DELIVER, createNatsJobQueue, type JobQueue } from '@cohort/transport'
import { DEFAULT_JOB_ACK_WAIT_MS, type WorkerJobOptions } from '@cohort/worker'
import { DEFAULT_WEBHOOK_ATTEMPTS, DEFAULT_WEBHOOK_INITIAL_DELAY_MS, DEFAULT_WEBHOOK_MAX_DELAY_MS, DEFAULT_WEBHOOK_TIMEOUT_MS, type WebhookOptions } from '@cohort/predictions'
import { ifSet, knobGiven, knobHelp, knobOptions, type Knob } from './knobs.ts'
import { subjectPrefix } from './prefix-flags.ts'
import { recordOptions, storeOptions } from './reliability-flags.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** Webhook delivery knobs: whoever sends a prediction's webhooks. */
export const WEBHOOK_KNOBS = Object.freeze({
  'webhook-attempts': { kind: 'int', arg: 'N', default: DEFAULT_WEBHOOK_ATTEMPTS, help: ['attempts per webhook event, the first included'] },
  'webhook-initial-delay-ms': { kind: 'int', arg: 'MS', min: 0, default: DEFAULT_WEBHOOK_INITIAL_DELAY_MS, help: ['wait before the first retry, doubled after each failure'] },
  'webhook-max-delay-ms': { kind: 'int', arg: 'MS', min: 0, default: DEFAULT_WEBHOOK_MAX_DELAY_MS, help: ['longest wait between attempts'] },
  'webhook-timeout-ms': { kind: 'int', arg: 'MS', default: DEFAULT_WEBHOOK_TIMEOUT_MS, help: ['per-attempt timeout'] },
} as const satisfies Record<string, Knob>)

/** The Cog-style prediction routes' knobs (serve, gateway). */
export const PREDICTION_KNOBS = Object.freeze({
  'default-model': { kind: 'string', arg: 'NAME', defaultText: 'the first served, by name', help: ['model answered at /predictions'] },
  'max-bulk-inputs': { kind: 'int', arg: 'N', default: DEFAULT_MAX_BULK_INPUTS, help: ['most inputs of one bulk request; more is 413'] },
} as const satisfies Record<string, Knob>)

/** Async prediction jobs on workers (serve, worker). */
export const JOB_KNOBS = Object.freeze({
  'job-ack-wait-ms': {
    kind: 'int',
    arg: 'MS',
    default: DEFAULT_JOB_ACK_WAIT_MS,
    help: ['async prediction jobs (NATS JetStream): redeliver a job whose worker died after', 'this long (default {default}; set when the job consumer is first created)'],
  },
  'job-max-deliver': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_JOB_MAX_DELIVER,
    help: [
      'deliveries of one job that may run it; the next one records it failed',
      '(default {default}; a job handed back because its model was overloaded or',
      'draining is not counted)',
    ],
  },
} as const satisfies Record<string, Knob>)

export const WEBHOOK_OPTIONS = knobOptions(WEBHOOK_KNOBS)
export const WEBHOOK_HELP = knobHelp(WEBHOOK_KNOBS)
export const PREDICTION_OPTIONS = { ...knobOptions(PREDICTION_KNOBS), ...WEBHOOK_OPTIONS }
export const PREDICTION_HELP = knobHelp(PREDICTION_KNOBS)
export const JOB_OPTIONS = { ...knobOptions(JOB_KNOBS), ...WEBHOOK_OPTIONS }
export const JOB_HELP = knobHelp(JOB_KNOBS)

/** Webhook retry settings from the flags; undefined when none is given. */
export function webhookOptions(v: Values): WebhookOptions | undefined {
  const k = knobGiven(WEBHOOK_KNOBS, v, {})
  const o: WebhookOptions = {
    ...ifSet('maxAttempts', k['webhook-attempts']),
    ...ifSet('initialDelayMs', k['webhook-initial-delay-ms']),
    ...ifSet('maxDelayMs', k['webhook-max-delay-ms']),
    ...ifSet('timeoutMs', k['webhook-timeout-ms']),
  }
  return Object.keys(o).length > 0 ? o : undefined
}

/** `defaultModel`, `maxBulkInputs` and webhook settings for createApp. */
export function predictionOptions(v: Values): { defaultModel?: string; maxBulkInputs?: number; predictions?: { webhooks: WebhookOptions } } {
  const k = knobGiven(PREDICTION_KNOBS, v, {})
  const webhooks = webhookOptions(v)
  return {
    ...ifSet('defaultModel', k['default-model']),
    ...ifSet('maxBulkInputs', k['max-bulk-inputs']),
    ...(webhooks ? { predictions: { webhooks } } : {}),
  }
}

/** The JetStream job queue on a NATS connection (its operations fail with 503 JOBS_UNAVAILABLE without JetStream). */
export function jobQueue(nc: NatsConnection, replicas: number | undefined, v: Values = {}): JobQueue {
  const maxDeliver = knobGiven(JOB_KNOBS, v, {})['job-max-deliver']
  const prefix = subjectPrefix(v)
  return createNatsJobQueue(nc, { ...(replicas ? { replicas } : {}), ...ifSet('maxDeliver', maxDeliver), ...(prefix ? { prefix } : {}), ...recordOptions(v) })
}

/** Worker-side job options from the flags. */
export function workerJobs(v: Values, queue: JobQueue): WorkerJobOptions {
  const ackWaitMs = knobGiven(JOB_KNOBS, v, {})['job-ack-wait-ms']
  const webhooks = webhookOptions(v)
  return { queue, ...ifSet('ackWaitMs', ackWaitMs), ...(webhooks ? { webhooks } : {}), ...storeOptions(v) }
}
