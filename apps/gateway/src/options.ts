import type { Context } from 'hono'
import type { Admission } from './admission.ts'
import type { Registry } from '@cohort/metrics'
import { DEFAULT_MAX_MESSAGE_BYTES, type AbortSignalLike, type InflightLimits, type JobQueue, type Transport } from '@cohort/transport'
import type { Tracer } from '@opentelemetry/api'
import { COHORT_VERSION, DEFAULT_SUBJECT_PREFIX } from '@cohort/protocol'
import { consoleErrorLogger, defaultTracer, type LogFields, type Logger } from '@cohort/observability'
import type { WorkerLossOptions } from './liveness.ts'
import type { WorkerWaitOptions } from './wait-check.ts'
import type { PredictionJobOptions } from './jobs/types.ts'

/** The server name answered at `GET /v2` and gRPC's `ServerMetadata`. */
export const DEFAULT_SERVER_NAME = 'cohort'

/** Default server-side request deadline: 30 s. A request may shorten it, never extend it. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** Default HTTP body limit: 64 MiB, the transport's default message bound. */
export const DEFAULT_MAX_BODY_BYTES = DEFAULT_MAX_MESSAGE_BYTES
/** Default wait for a worker's metadata answer. */
export const DEFAULT_META_TIMEOUT_MS = 2_000

/** Dependencies and options of {@link createApp}. */
export interface GatewayOptions {
  /** The bus to the workers (NATS or in-process). */
  transport: Transport
  /** NATS subject prefix. @default 'cohort' */
  subjectPrefix?: string
  /** Server-side deadline of a request in ms. @default 30000 */
  requestTimeoutMs?: number
  /** Largest HTTP body accepted, bytes. @default 64 MiB */
  maxBodyBytes?: number
  /**
   * Bounds on the requests with bodies and their bytes held at once (`maxRequests` 1024,
   * `maxBytes` 256 MiB by default): past them 503 OVERLOADED + Retry-After before the body is read.
   * `false` turns them off. See docs/reliability.md#bounds.
   * @default {}
   */
  inflight?: InflightLimits | false
  /** Metadata request timeout, ms. @default 2000 */
  metaTimeoutMs?: number
  /** Metrics registry rendered at /metrics (shared with the worker in embedded mode). */
  registry?: Registry
  /** Server name and version in `GET /v2`. */
  serverName?: string
  serverVersion?: string
  /** Model answered at `/predictions`. @default the first model a worker reports */
  defaultModel?: string
  /** Extra text rendered at /metrics (e.g. the embedded worker's registry). Not shown on the dashboard. */
  extraMetrics?: () => string
  /** The live dashboard's history (`GET /dashboard`). @default sampled only when the page polls */
  dashboard?: DashboardSettings
  /** Most inputs in one bulk request. @default 1000 */
  maxBulkInputs?: number
  /** Keys accepted on admin routes (`Authorization: Bearer KEY`). Admin routes are open when empty. */
  adminKeys?: string[]
  /**
   * API keys accepted on every route but health and admin (`Authorization: Bearer KEY`).
   * Authentication is on when `apiKeys` or `jwt` is given; off by default. See docs/security.md.
   */
  apiKeys?: string[]
  /** JWT bearer tokens (verified with `hono/jwt`); a valid token or an API key passes. */
  jwt?: JwtAuthOptions
  /** Serve `/metrics` without credentials while authentication is on. @default false */
  metricsOpen?: boolean
  /** Token-bucket rate limit per client (API key, JWT `sub`, else client address). Off by default. */
  rateLimit?: RateLimitOptions
  /** CORS (off by default): the origins allowed to call the gateway from a browser. */
  cors?: CorsOptions
  /**
   * Runtime adapter hooks (optional): a cheaper body reader and client-disconnect signal than the
   * Web `Request` ones. The Node entry passes versions built on `IncomingMessage`/`ServerResponse`.
   */
  adapter?: GatewayAdapter
  /**
   * Called with unexpected errors (never with CohortErrors), with the request's log fields (model,
   * requestId, traceId) when known. @default `logger.error({ ...fields, err }, 'unexpected error')`
   */
  onUnexpectedError?: (e: unknown, fields?: LogFields) => void
  /**
   * Tracer of the `cohort.gateway.infer` spans (see docs/observability.md).
   * @default trace.getTracer('cohort'): a no-op unless an OpenTelemetry SDK is registered
   */
  tracer?: Tracer
  /**
   * Shutdown hook: while it returns true the gateway is draining. `GET /v2/health/ready` answers
   * 503 `{ ready: false, draining: true }` (so load balancers and Kubernetes stop sending new work)
   * and every response carries `Connection: close`; requests are still served. The Node entry
   * turns it on at SIGTERM for `--drain-ms` before it stops listening. @default never draining
   */
  draining?: () => boolean
  /**
   * Structured logger (pino fits): failed requests at `warn`, unexpected errors at `error`.
   * @default errors to console.error, other levels dropped
   */
  logger?: Logger
  /**
   * Worker-loss detection: fail (503 WORKER_LOST, `Retry-After`) or retry on another worker the
   * requests held by a worker whose heartbeats stopped, instead of waiting for their deadline.
   * `false` turns it off. See docs/architecture.md#worker-loss.
   * @default {} (3 missed heartbeats, 1 retry for requests marked safe to retry)
   */
  workerLoss?: WorkerLossOptions | false
  /**
   * The door's worker-wait check (docs/batching.md#admission-at-the-door): a request no worker can
   * finish before its deadline, by the workers' queue-wait estimates, is refused 503 OVERLOADED
   * with `Retry-After` before its body is read, without a NATS round trip. Needs `workerLoss` (the
   * estimates come with heartbeats and accept notices). `false` turns it off (`--no-worker-wait`).
   * `control`: the admission margin and outcome feedback (docs/architecture.md#admission-target).
   * @default {} (probe every 100 ms, estimates stale after 2 heartbeat intervals, margin 0.2)
   */
  workerWait?: WorkerWaitOptions | false
  /**
   * Refusals (503 OVERLOADED) write no log line each: one aggregated `warn` line at most every this
   * many ms (docs/reliability.md#refusals-under-overload); 0 logs each. @default 10000
   */
  refusalLogIntervalMs?: number
  /** Id of this gateway instance (its acceptance-notice subject). @default random (`g-` and 8 hex digits) */
  gatewayId?: string
  /**
   * Apply the server-side SLO each model's workers announce as the deadline of requests whose
   * client sends none (docs/batching.md#server-side-slo). @default true
   */
  serverSlo?: boolean
  /**
   * Durable async predictions (`Prefer: respond-async`, `PUT /predictions/{id}`) in NATS JetStream
   * (`createNatsJobQueue`). Without it they are held in this gateway's memory (embedded mode).
   */
  jobs?: JobQueue
  /** Async prediction settings: deadline, in-memory bound, webhook retries (docs/predictions.md). */
  predictions?: PredictionJobOptions
}

/** JWT verification settings of {@link GatewayOptions.jwt}. */
export interface JwtAuthOptions {
  /** HMAC secret (HS*), or the PEM public key for RS*, PS*, ES* and EdDSA. */
  secret: string
  /** @default 'HS256' */
  alg?: 'HS256' | 'HS384' | 'HS512' | 'RS256' | 'RS384' | 'RS512' | 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512' | 'EdDSA'
  /** Required `iss` claim. */
  issuer?: string
  /** Required `aud` claim (one of). */
  audience?: string | string[]
  /** A scope the token must hold (`scope` claim, space-separated, or `scp` array); 403 otherwise. */
  scope?: string
}

/** Settings of {@link GatewayOptions.rateLimit}. */
export interface RateLimitOptions {
  /** Sustained requests per second per client. */
  requestsPerSecond: number
  /** Requests a client may make at once after being idle. @default max(1, requestsPerSecond) */
  burst?: number
  /** Most clients tracked; the least recently seen are forgotten beyond it. @default 10000 */
  maxClients?: number
  /** Clock in ms (tests). @default Date.now */
  now?: () => number
}

/** Settings of {@link GatewayOptions.cors}. */
export interface CorsOptions {
  /** Allowed origins, e.g. `https://app.example.com`; `*` allows any origin. */
  origins: string[]
  /** Send `Access-Control-Allow-Credentials: true`. @default false */
  credentials?: boolean
  /** Preflight cache time in seconds. @default 600 */
  maxAgeS?: number
}

/** Runtime-specific fast paths of the gateway. */
export interface GatewayAdapter {
  /**
   * Read the body, at most `max` bytes (throw CohortError PAYLOAD_TOO_LARGE beyond), calling
   * `onChunk` with each chunk's size as it arrives (it may throw to stop reading, for the in-flight bound).
   */
  readBody?(c: Context, max: number, onChunk?: (n: number) => void): Promise<Uint8Array>
  /** A signal that aborts when the client disconnects before the response is sent. */
  clientGone?(c: Context): AbortSignalLike | undefined
  /** The client's network address: the rate-limit key of a request without credentials or `x-forwarded-for`. */
  clientAddress?(c: Context): string | undefined
  /**
   * How long (ms) a request arriving now has plausibly waited before its handler ran (on Node:
   * the event loop's current delay). It is taken off the request's deadline, and a request whose
   * whole budget it exceeds is refused 503 at once, before its body is read. @default 0
   */
  queueDelayMs?(): number
  /**
   * When the request arrived (`performance.now()` ms; the Node listener: its connection's accept
   * for the first request, its `request` event for later ones). The door counts the wait since
   * then ({@link Arrival.waitedMs}): taken off the deadline, and a request that already waited its
   * budget is refused 503 at once (check `arrival_wait`). @default none (not measured)
   */
  arrivedAt?(c: Context): number | undefined
  /**
   * The door's admission of the request, when the runtime's listener judged it before the app ran
   * ({@link EarlyDoor}, early.ts): the infer route uses it instead of judging again. @default none
   */
  admission?(c: Context): Admission | undefined
  /**
   * The request's headers as the runtime's server parsed them (lower-case names; on Node
   * `IncomingMessage.headers`), read by {@link headerOf} instead of the Web `Headers` that a
   * first `c.req.header()` builds for each request. @default none (`c.req.header`)
   */
  headers?(c: Context): RequestHeaders | undefined
}

/** Request headers by lower-case name, as a runtime's server parsed them (repeated ones: an array, or joined). */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>

/** Settings of the live dashboard's server-side history (a ring buffer of samples). */
export interface DashboardSettings {
  /**
   * Sample the metrics every this many ms in the background, so that a page opened now shows the
   * last minutes at once. 0: sample only when a page polls (edge runtimes, where timers outlive no
   * request). The Node entries (`cohort serve`, `cohort gateway`) use 1000. @default 0
   */
  sampleMs?: number
  /** Samples kept (at `sampleMs` 1000, 300 is the last 5 minutes). @default 300 */
  keep?: number
  /** Aborting it stops the background sampler (the Node entries abort it at shutdown). */
  signal?: AbortSignal
}

/** Options with defaults applied. */
export type ResolvedGatewayOptions = Required<
  Omit<
    GatewayOptions,
    'registry' | 'defaultModel' | 'extraMetrics' | 'adminKeys' | 'maxBulkInputs' | 'adapter' | 'draining' | SecurityOptionKeys | LivenessOptionKeys | JobOptionKeys
  >
> &
  Pick<
    GatewayOptions,
    'registry' | 'defaultModel' | 'extraMetrics' | 'adminKeys' | 'maxBulkInputs' | 'adapter' | 'draining' | SecurityOptionKeys | LivenessOptionKeys | JobOptionKeys
  >

/** Async prediction settings: defaults applied in jobs/. */
type JobOptionKeys = 'jobs' | 'predictions'

/** Worker-loss settings: their defaults are applied where the detector is built (liveness.ts). */
type LivenessOptionKeys = 'workerLoss' | 'gatewayId' | 'workerWait' | 'serverSlo' | 'refusalLogIntervalMs'

/** The optional security settings (authentication, rate limit, CORS): no defaults to apply. */
type SecurityOptionKeys = 'apiKeys' | 'jwt' | 'metricsOpen' | 'rateLimit' | 'cors' | 'inflight'

/** The nested plain option objects, copied and frozen by {@link resolveOptions}. */
const NESTED = ['inflight', 'workerLoss', 'workerWait', 'dashboard', 'predictions', 'jwt', 'rateLimit', 'cors', 'adapter'] as const

/**
 * Merge defaults in one place, check invariants, and freeze: the gateway core calls it once and
 * every part reads the same object (a RangeError names a bad value).
 */
export function resolveOptions(o: GatewayOptions): ResolvedGatewayOptions {
  const r: ResolvedGatewayOptions = {
    subjectPrefix: DEFAULT_SUBJECT_PREFIX,
    requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    metaTimeoutMs: DEFAULT_META_TIMEOUT_MS,
    serverName: DEFAULT_SERVER_NAME,
    serverVersion: COHORT_VERSION,
    onUnexpectedError: (e, fields) => r.logger.error({ ...fields, err: e }, 'unexpected error'),
    ...o,
    dashboard: o.dashboard ?? {}, // after the spread: an explicit `dashboard: undefined` gets the default too
    tracer: o.tracer ?? defaultTracer(),
    logger: o.logger ?? consoleErrorLogger,
  }
  for (const k of ['requestTimeoutMs', 'maxBodyBytes', 'metaTimeoutMs'] as const) {
    if (!(r[k] > 0)) {
      throw new RangeError(`${k} must be > 0, got ${String(r[k])}`)
    }
  }
  if (r.maxBulkInputs !== undefined && !(Number.isSafeInteger(r.maxBulkInputs) && r.maxBulkInputs >= 1)) {
    throw new RangeError(`maxBulkInputs must be an integer >= 1, got ${String(r.maxBulkInputs)}`)
  }
  if (typeof r.subjectPrefix !== 'string' || r.subjectPrefix === '') {
    throw new RangeError('subjectPrefix must be a non-empty string')
  }
  const w = r as Record<string, unknown>
  for (const k of NESTED) {
    const v = w[k]
    if (v !== undefined && v !== false && typeof v === 'object') {
      w[k] = Object.freeze({ ...v })
    }
  }
  return Object.freeze(r)
}
