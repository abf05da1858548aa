/**
 * Cog-style prediction records (what `GET /predictions/{id}` answers and webhooks carry), shared by
 * the gateway and the workers that run async prediction jobs. Pure: no I/O.
 * @module
 */

/** Cog's prediction states; the last three are terminal. */
export type PredictionStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled'

/** Cog's webhook events. `logs` is accepted in filters; Cohort has no predictor logs to send. */
/** Default deadline of an async prediction (a job), ms from its start: 10 minutes. Gateway and worker both use it. */
export const DEFAULT_JOB_TIMEOUT_MS = 600_000

export const WEBHOOK_EVENTS = ['start', 'output', 'logs', 'completed'] as const

/** One webhook event name. */
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number]

/** A prediction as stored and answered (Cog's PredictionResponse plus `model`). */
export interface Prediction {
  id: string
  /** The model that runs it. */
  model: string
  status: PredictionStatus
  input: unknown
  output: unknown
  error: string | null
  /** The error code from docs/errors.md when `status` is `failed`. */
  code?: string
  logs: string
  created_at: string
  started_at: string | null
  completed_at: string | null
  /** `predict_time` in seconds (compute time of the batch the prediction ran in). */
  metrics: Record<string, number>
  webhook?: string
  webhook_events_filter?: WebhookEvent[]
  /** How many times a worker picked the job up to run it (more than 1 after a redelivery). */
  attempts?: number
  /**
   * How many times a worker handed the job back unrun because its model was overloaded or shutting
   * down. Not counted in `attempts` nor against the delivery budget (docs/reliability.md).
   */
  deferrals?: number
}

/** Prediction ids: what a NATS KV key and a URL path segment both take. */
export const PREDICTION_ID_RE = /^[A-Za-z0-9_-]{1,128}$/

/** True for `succeeded`, `failed` and `canceled`. */
export function isTerminal(s: PredictionStatus): boolean {
  return s === 'succeeded' || s === 'failed' || s === 'canceled'
}

/** A new prediction record in state `starting`. */
export function newPrediction(p: {
  id: string
  model: string
  input: unknown
  webhook?: string | undefined
  webhookEventsFilter?: WebhookEvent[] | undefined
  now?: Date
}): Prediction {
  return {
    id: p.id,
    model: p.model,
    status: 'starting',
    input: p.input,
    output: null,
    error: null,
    logs: '',
    created_at: (p.now ?? new Date()).toISOString(),
    started_at: null,
    completed_at: null,
    metrics: {},
    ...(p.webhook ? { webhook: p.webhook } : {}),
    ...(p.webhook && p.webhookEventsFilter ? { webhook_events_filter: p.webhookEventsFilter } : {}),
  }
}

/** True when the record's webhook wants `event` (Cog: every event when no filter is given). */
export function wantsEvent(p: Prediction, event: WebhookEvent): boolean {
  if (!p.webhook) {
    return false
  }
  return !p.webhook_events_filter || p.webhook_events_filter.includes(event)
}

/** Encode a record for storage (JSON bytes). */
export function encodePrediction(p: Prediction): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(p))
}

/** Decode a stored record. */
export function decodePrediction(b: Uint8Array): Prediction {
  return JSON.parse(new TextDecoder().decode(b)) as Prediction
}

/** The record after its run: `succeeded` with the output, or `failed` with the error and its code. */
export function finishPrediction(p: Prediction, r: { output?: unknown; error?: { code: string; message: string }; computeMs?: number | undefined }, now = new Date()): Prediction {
  const out: Prediction = {
    ...p,
    status: r.error ? (r.error.code === 'CANCELLED' ? 'canceled' : 'failed') : 'succeeded',
    output: r.error ? null : (r.output ?? null),
    error: r.error ? r.error.message : null,
    completed_at: now.toISOString(),
    metrics: r.computeMs !== undefined ? { ...p.metrics, predict_time: r.computeMs / 1000 } : p.metrics,
  }
  if (r.error) {
    out.code = r.error.code
  } else {
    delete out.code
  }
  return out
}
