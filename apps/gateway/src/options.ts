import type { Context } from 'hono'
import type { Registry } from '@cohort/metrics'
import type { AbortSignalLike, Transport } from '@cohort/transport'

/** Default server-side request deadline: 30 s. A request may shorten it, never extend it. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** Default HTTP body limit: 64 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
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
  /** Metadata request timeout, ms. @default 2000 */
  metaTimeoutMs?: number
  /** Metrics registry rendered at /metrics (shared with the worker in embedded mode). */
  registry?: Registry
  /** Server name and version in `GET /v2`. */
  serverName?: string
  serverVersion?: string
  /** Model answered at `/predictions`. @default the first model a worker reports */
  defaultModel?: string
  /** Extra text rendered at /metrics (e.g. the embedded worker's registry). */
  extraMetrics?: () => string
  /** Most inputs in one bulk request. @default 1000 */
  maxBulkInputs?: number
  /** Keys accepted on admin routes (`Authorization: Bearer KEY`). Admin routes are open when empty. */
  adminKeys?: string[]
  /**
   * Runtime adapter hooks (optional): a cheaper body reader and client-disconnect signal than the
   * Web `Request` ones. The Node entry passes versions built on `IncomingMessage`/`ServerResponse`.
   */
  adapter?: GatewayAdapter
  /** Called with unexpected errors (never with CohortErrors). @default console.error */
  onUnexpectedError?: (e: unknown) => void
}

/** Runtime-specific fast paths of the gateway. */
export interface GatewayAdapter {
  /** Read the body, at most `max` bytes (throw CohortError PAYLOAD_TOO_LARGE beyond). */
  readBody?(c: Context, max: number): Promise<Uint8Array>
  /** A signal that aborts when the client disconnects before the response is sent. */
  clientGone?(c: Context): AbortSignalLike | undefined
}

/** Options with defaults applied. */
export type ResolvedGatewayOptions = Required<Omit<GatewayOptions, 'registry' | 'defaultModel' | 'extraMetrics' | 'adminKeys' | 'maxBulkInputs' | 'adapter'>> &
  Pick<GatewayOptions, 'registry' | 'defaultModel' | 'extraMetrics' | 'adminKeys' | 'maxBulkInputs' | 'adapter'>

/** Merge defaults in one place and check invariants. */
export function resolveOptions(o: GatewayOptions): ResolvedGatewayOptions {
  const r: ResolvedGatewayOptions = {
    subjectPrefix: 'cohort',
    requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    metaTimeoutMs: DEFAULT_META_TIMEOUT_MS,
    serverName: 'cohort',
    serverVersion: '0.1.0',
    onUnexpectedError: (e) => console.error(e),
    ...o,
  }
  if (!(r.requestTimeoutMs > 0) || !(r.maxBodyBytes > 0) || !(r.metaTimeoutMs > 0)) {
    throw new RangeError('requestTimeoutMs, maxBodyBytes and metaTimeoutMs must be > 0')
  }
  return r
}
