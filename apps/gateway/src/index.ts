/**
 * The Cohort gateway: a pure Hono app speaking the Open Inference Protocol (and Cog-style
 * predictions) that forwards each request over the transport to the model's workers.
 * The public API is listed here by name (no module is re-exported whole): what is not here is
 * internal and may change without notice.
 * @module
 */
export { createApp, type GatewayApp } from './app.ts'
export { createGatewayCore, newGatewayId, type GatewayCore } from './core.ts'
export {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_META_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SERVER_NAME,
  resolveOptions,
  type CorsOptions,
  type DashboardSettings,
  type GatewayAdapter,
  type GatewayOptions,
  type JwtAuthOptions,
  type RateLimitOptions,
  type RequestHeaders,
  type ResolvedGatewayOptions,
} from './options.ts'
export { headerOf } from './request-header.ts'
export { Upstream } from './upstream.ts'
export { type WorkerEndpointSummary, type WorkerSummary } from './discovery.ts'
export { DEFAULT_ACCEPT_TIMEOUT_MS, DEFAULT_MISSED_HEARTBEATS, WorkerLiveness, type WorkerLossOptions } from './liveness.ts'
export { DEFAULT_PACK_BYTES, DEFAULT_PACK_REQUESTS, type PackerOptions } from './packer.ts'
export { effectiveTimeoutMs } from './lag-check.ts'
export { declaredLength, parseLengthHeader, readBody } from './body.ts'
export {
  GENERATION_REPLY_GRACE_MS,
  InferenceDoor,
  Passage,
  REPLY_GRACE_MS,
  firstItemError,
  itemError,
  metricModel,
  type Arrival,
  type DoorOptions,
  type DoorPayload,
  type ItemOutcome,
  type PredictionCall,
  type SendOptions,
} from './door.ts'
export { EarlyDoor, type EarlyAnswer, type EarlyDecision, type RequestHead } from './early.ts'
export { ADMISSION, checkModelPath, type Admission, type AdmissionPolicy, type Origin } from './admission.ts'
export { DEFAULT_PROBE_INTERVAL_MS, DEFAULT_STALE_HEARTBEATS, DOOR_CHECKS, type DoorCheck, type WorkerWaitOptions } from './wait-check.ts'
export { DEFAULT_MAX_BULK_INPUTS } from './routes/bulk.ts'
export type { PredictionJobOptions } from './jobs/types.ts'
export { AdmissionControl, DEFAULT_ADMISSION_MARGIN, type AdmissionControlOptions } from './admission-control.ts'
export { DEFAULT_REFUSAL_LOG_INTERVAL_MS, DRAIN_REFUSED_BYTES, RefusalLog } from './refusal.ts'
