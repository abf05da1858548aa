import { DEFAULT_JOB_TIMEOUT_MS, type Prediction, type WebhookOptions } from '@cohort/predictions'

/** Where async predictions live: in gateway memory (embedded) or in NATS JetStream (durable). */
export interface PredictionJobs {
  readonly kind: 'memory' | 'jetstream'
  /** Store and start `p` unless a prediction with its id exists; then the existing one is answered. */
  submit(p: Prediction): Promise<{ prediction: Prediction; created: boolean }>
  get(id: string): Promise<Prediction | undefined>
  /** Cancel: a prediction not yet finished ends as `canceled`. Undefined when unknown. */
  cancel(id: string): Promise<Prediction | undefined>
  /** The prediction once terminal, or as it is after `timeoutMs`. */
  wait(id: string, timeoutMs: number): Promise<Prediction | undefined>
  /** Stop (webhook retries are dropped). Idempotent. */
  close(): Promise<void>
}

/** Options of async predictions ({@link import('../options.ts').GatewayOptions.predictions}). */
export interface PredictionJobOptions {
  /** Deadline of an async prediction, ms from its start. @default 600000 */
  timeoutMs?: number
  /** Most predictions kept in memory (embedded mode); the oldest finished ones go first. @default 10000 */
  maxInMemory?: number
  /**
   * In-memory jobs: wait before a prediction the door refused for load (OVERLOADED, SHUTTING_DOWN)
   * is tried again, ms, doubled per refusal up to `deferMaxDelayMs`, with jitter; tried until its
   * deadline (`timeoutMs` from its start). Durable jobs have the worker's own (`cohort worker`).
   * @default 1000
   */
  deferDelayMs?: number
  /** Longest wait before a refused in-memory prediction is tried again, ms. @default 10000 */
  deferMaxDelayMs?: number
  /** Webhook delivery (attempts, backoff). */
  webhooks?: WebhookOptions
}

export { DEFAULT_JOB_TIMEOUT_MS }
