/**
 * The NATS services protocol (ADR-32, "micro"): the `$SRV.PING|INFO|STATS` subjects and the JSON
 * bodies every Cohort worker answers them with, so that `nats micro ls/info/stats` and the gateway
 * can find workers and read their per-model counters. Types and subject names only.
 * @module
 */

/** The service name every Cohort worker registers under. */
export const SERVICE_NAME = 'cohort-worker'

/** Root of the services protocol subjects. */
export const SRV_PREFIX = '$SRV'

/** The three discovery verbs of ADR-32. */
export type ServiceVerb = 'PING' | 'INFO' | 'STATS'

/** All verbs, in protocol order. */
export const SERVICE_VERBS: readonly ServiceVerb[] = ['PING', 'INFO', 'STATS']

/** Response `type` strings of ADR-32 v1. */
export const SERVICE_RESPONSE_TYPES = {
  PING: 'io.nats.micro.v1.ping_response',
  INFO: 'io.nats.micro.v1.info_response',
  STATS: 'io.nats.micro.v1.stats_response',
} as const satisfies Record<ServiceVerb, string>

/**
 * `$SRV.<VERB>`, `$SRV.<VERB>.<name>` or `$SRV.<VERB>.<name>.<id>`: all services, all instances of
 * one service, or one instance.
 */
export function serviceSubject(verb: ServiceVerb, name?: string, id?: string): string {
  if (id !== undefined && name === undefined) {
    throw new TypeError('a service id needs a service name')
  }
  return [SRV_PREFIX, verb, ...(name !== undefined ? [name] : []), ...(id !== undefined ? [id] : [])].join('.')
}

/** True when `s` can be one token of a NATS subject (so it can name a service or an instance). */
export function isSubjectToken(s: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(s)
}

/** Fields every services response carries. Metadata values are strings (Go's map[string]string). */
export interface ServiceIdentity {
  name: string
  id: string
  /** Semantic version of the service. */
  version: string
  metadata: Record<string, string>
}

/** `$SRV.PING` answer. */
export interface ServicePingResponse extends ServiceIdentity {
  type: typeof SERVICE_RESPONSE_TYPES.PING
}

/** One endpoint of a service: for Cohort, one model. */
export interface ServiceEndpointInfo {
  /** The model name, with any character outside [A-Za-z0-9_-] made '_' (ADR-32 endpoint names). */
  name: string
  /** `<prefix>.infer.<model>`. */
  subject: string
  /** `<prefix>.q.<model>`. */
  queue_group: string
  /** String values only: model (the exact model name), max_batch_size, policy, ready, ... */
  metadata: Record<string, string>
}

/** `$SRV.INFO` answer. */
export interface ServiceInfoResponse extends ServiceIdentity {
  type: typeof SERVICE_RESPONSE_TYPES.INFO
  description: string
  endpoints: ServiceEndpointInfo[]
}

/** Cohort's endpoint-specific stats (`data` of an endpoint in `$SRV.STATS`). */
export interface CohortEndpointData {
  /** Items waiting in the batch queue now. */
  queued: number
  /** Items in batches running now. */
  running: number
  /** Batches run since start. */
  batches: number
  /** Items run since start. */
  items: number
  /** items / batches (0 before the first batch). */
  mean_batch_size: number
  /** Triton-style inference statistics (`GET /v2/models/{m}/stats`); absent from older workers. */
  inference?: InferenceStatsData
}

/** A count and its summed duration in ns (Triton's `StatisticDuration`). */
export interface DurationStat {
  count: number
  ns: number
}

/**
 * One worker's inference statistics for one model, in the shape of Triton's `InferStatistics`:
 * `success`/`fail` count requests and their receipt-to-reply time; `queue`, `compute_input`,
 * `compute_infer` and `compute_output` count successful requests and the time their items spent
 * queued and in the batch that ran them (input/output conversion is inside `compute_infer`, so
 * those two stay 0 ns). Times in ns.
 */
export interface InferenceStatsData {
  success: DurationStat
  fail: DurationStat
  queue: DurationStat
  compute_input: DurationStat
  compute_infer: DurationStat
  compute_output: DurationStat
  /** Items run (successful requests' items). */
  inference_count: number
  /** Batches run. */
  execution_count: number
  /** Time of the latest reply, ms since the epoch (0 before the first). */
  last_inference: number
  /** Per batch size: batches run and their summed compute time. */
  batch_stats: { batch_size: number; compute_infer: DurationStat }[]
}

/** Per-endpoint counters of `$SRV.STATS`. Times are in nanoseconds. */
export interface ServiceEndpointStats {
  name: string
  subject: string
  queue_group: string
  /** Inference requests received (on the main and the overflow subject). */
  num_requests: number
  /** Requests answered with an error (request-level, or at least one failed item). */
  num_errors: number
  /** `CODE: message` of the latest error, '' if none. */
  last_error: string
  /** Total time from receipt to reply over all requests, ns. */
  processing_time: number
  /** processing_time / num_requests, ns. */
  average_processing_time: number
  data: CohortEndpointData
}

/** `$SRV.STATS` answer. */
export interface ServiceStatsResponse extends ServiceIdentity {
  type: typeof SERVICE_RESPONSE_TYPES.STATS
  /** When the service started, ISO 8601. */
  started: string
  endpoints: ServiceEndpointStats[]
}
