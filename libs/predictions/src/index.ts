/**
 * Cog-style predictions: the record (`GET /predictions/{id}`, webhook bodies), its one lifecycle
 * (starting -> processing -> succeeded | failed | canceled, with the webhooks each step sends) and
 * webhook delivery. Shared by the gateway (in-memory jobs), the workers (durable jobs) and the
 * Redis bridge. Pure and runtime-agnostic: the HTTP client is injected. See docs/predictions.md.
 * @module
 */
export {
  decodePrediction,
  DEFAULT_JOB_TIMEOUT_MS,
  encodePrediction,
  finishPrediction,
  isTerminal,
  newPrediction,
  type Prediction,
  PREDICTION_ID_RE,
  type PredictionStatus,
  wantsEvent,
  WEBHOOK_EVENTS,
  type WebhookEvent,
} from './predictions.ts'
export {
  backoffMs,
  DEFAULT_WEBHOOK_ATTEMPTS,
  DEFAULT_WEBHOOK_INITIAL_DELAY_MS,
  DEFAULT_WEBHOOK_MAX_DELAY_MS,
  DEFAULT_WEBHOOK_TIMEOUT_MS,
  type WebhookOptions,
  WebhookSender,
} from './webhooks.ts'
export { DEFAULT_DEFER_DELAY_MS, DEFAULT_DEFER_MAX_DELAY_MS, deferDelay, LOAD_REFUSALS } from './defer.ts'
export { outcomeOf, PredictionLifecycle, type PredictionOutcome } from './lifecycle.ts'
