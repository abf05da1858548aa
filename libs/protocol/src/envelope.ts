import type { GenerateInput, GenerateResult, GenerativeInfo, TokenStep } from './generate.ts'
import type { WireTensor } from './tensor.ts'
import type { WireError } from './wire-error.ts'

export type { WireError } from './wire-error.ts'

/** Version of the envelope format; bumped on incompatible changes. */
export const ENVELOPE_VERSION = 1

/**
 * What the gateway publishes on `cohort.infer.<model>` (msgpack, standard maps, no records).
 *
 * Exactly one of `tensors` (batch-major tensors whose shape[0] = number of items) or `items`
 * (one JSON value per item, for schema predictors and Cog-style inputs) is present.
 */
export interface InferRequest {
  v: typeof ENVELOPE_VERSION
  /** Request id, unique per gateway request; echoed in the reply and used for cancellation. */
  id: string
  /** Model name (also in the subject). */
  model: string
  /** Absolute deadline, epoch milliseconds. Items still queued at the deadline are answered 504. */
  deadline: number
  /**
   * W3C `traceparent` of the request's parent span (the gateway's `cohort.gateway.infer` span, or
   * the HTTP caller's when tracing is off), if any. See docs/observability.md.
   */
  traceparent?: string
  /** W3C `tracestate` that goes with `traceparent`, if any. */
  tracestate?: string
  /** Higher runs first when the engine supports priorities. Default 0. */
  priority?: number
  /**
   * The tenant the request is billed to for fair shares of batch slots: the gateway's client id
   * (`key:<i>`, `jwt:<sub>`), at most 128 characters. Absent: the one anonymous tenant. Optional,
   * so older gateways and workers interoperate (an older worker ignores it).
   */
  tenant?: string
  /** Batch-major input tensors, by input name. shape[0] of each = item count. */
  tensors?: Record<string, WireTensor>
  /** JSON items (one per prediction). */
  items?: unknown[]
  /** Names of the outputs wanted; all when absent. */
  outputs?: string[]
  /** A generation (generative models, docs/generative.md): the prompt and sampling settings. */
  generate?: GenerateInput
  /**
   * Where the worker that takes the request says so at once ({@link AcceptNotice}), so the gateway
   * knows which worker holds it and can fail or retry it when that worker's heartbeats stop.
   */
  ack?: string
  /**
   * The model version the request is for (`/v2/models/{m}/versions/{v}/...`); absent: whichever
   * version serves the bare subject. A worker serving another version answers MODEL_NOT_FOUND.
   */
  version?: string
}

/** Timing of an item as measured by the worker, in milliseconds. */
export interface ItemTiming {
  /** Time queued in the worker before its batch started. */
  queueMs: number
  /** Compute time of the batch it ran in. */
  computeMs: number
  /** Size (items) of the batch it ran in. */
  batchSize: number
}

/**
 * The worker's reply to an {@link InferRequest}.
 *
 * `error` set: the whole request failed before any item ran (bad envelope, unknown model).
 * Otherwise `errors[i]` is null or the failure of item i, and outputs come as batch-major
 * `tensors` (for tensor models) or `items` (JSON outputs, one per item).
 */
export interface InferReply {
  v: typeof ENVELOPE_VERSION
  id: string
  error?: WireError
  errors?: (WireError | null)[]
  tensors?: Record<string, WireTensor>
  items?: unknown[]
  timing?: ItemTiming[]
  /** Id of the worker that answered. */
  worker?: string
  /** The model version that answered (a repository model's; absent: version "1"). */
  version?: string
  /** The end of a generation (a request with `generate`). */
  generated?: GenerateResult
}

/** Published on `cohort.cancel.<model>` when a client goes away: drop its queued items. */
export interface CancelNotice {
  v: typeof ENVELOPE_VERSION
  id: string
}

/** Tensor description in model metadata (OIP `$metadata_tensor`). -1 marks a variable dim. */
export interface TensorMeta {
  name: string
  datatype: string
  shape: number[]
}

/** Model metadata, answered on `cohort.meta.<model>`; OIP model metadata plus batching. */
export interface ModelMeta {
  name: string
  /** The versions served (a repository model's, merged over workers by the gateway; else `["1"]`). */
  versions: string[]
  /** The version that answered this metadata request (repository models only). */
  version?: string
  platform: string
  inputs: TensorMeta[]
  outputs: TensorMeta[]
  /** Kind of predictor: an ONNX model, a TypeScript schema predictor, or a generative model (docs/generative.md). */
  kind: 'onnx' | 'predictor' | 'generative'
  /** A generative model's limits and chat template (`kind: 'generative'`). */
  generative?: GenerativeInfo
  ready: boolean
  maxBatchSize: number
  maxDelayMs: number
  /** Live batching settings of the answering worker. */
  policy?: string
  maxQueue?: number
  maxBatchCost?: number | null
  /** Admission at enqueue on (refuse at once what would finish late). */
  admission?: boolean
  /** Learned batch cost t(b) = a + c*b in ms, when the engine has samples. */
  cost?: { a: number; c: number; samples: number }
  /** Items queued on the answering worker. */
  queued?: number
  /**
   * The server-side SLO in force (ms; `source`: configured `sloMs`, derived from the learned cost,
   * or the cold default): the gateway's deadline for requests whose client sends none.
   */
  slo?: { ms: number; source: string }
  /**
   * Where each live batching value came from, per field: `default`, `model`, `file`, `flags` or
   * `runtime` (`@cohort/batching` layers.ts; docs/repository.md).
   */
  configSources?: Record<string, string>
  /** The model's own hard batch limit (a leading dimension fixed at 1) and why. */
  batchLimit?: { maxBatchSize: number; reason: string }
  /** JSON Schema of one input item (schema predictors). */
  inputSchema?: unknown
  /** JSON Schema of one output item, when declared. */
  outputSchema?: unknown
}

/** Published by a worker on the request's `ack` subject as soon as it receives the request. */
export interface AcceptNotice {
  v: typeof ENVELOPE_VERSION
  /** The request id. */
  id: string
  /** Id of the worker that took it. */
  worker: string
}

/** Published by every worker on `cohort.heartbeat` every `intervalMs` while it runs. */
export interface Heartbeat {
  v: typeof ENVELOPE_VERSION
  /** The worker id (the `id` field of the envelope). */
  id: string
  /** Time between two heartbeats of this worker, ms. */
  intervalMs: number
  /** Set on the last heartbeat of a worker that finished draining: forget it without failing anything. */
  bye?: boolean
  /** Highest gateway<->worker protocol version the worker speaks ({@link PROTOCOL_VERSION}); absent: 1. */
  proto?: number
  /**
   * The worker's queue-wait estimate per model it serves (admission at the gateway,
   * docs/batching.md#admission-at-the-door), so an idle gateway learns it too. Optional: older
   * gateways ignore it, older workers send none.
   */
  models?: Record<string, WaitEstimate>
  /**
   * Models not ready because a batch of theirs is running past the deadlines of all its items
   * (docs/reliability.md#readiness-of-a-hung-model). Absent: none (or an older worker).
   */
  stalled?: string[]
}

/**
 * A worker's estimate of how long a new item of one model would wait (docs/batching.md#admission-at-the-door):
 * from its batch engine's backlog and learned cost t(b), upper estimates, for a new item of cost 1
 * and priority 0. Sent only while the worker's own admission judges arrivals (admission on, an
 * `eager` or `deadline` policy, enough cost samples): no estimate means the gateway admits.
 */
export interface WaitEstimate {
  /** Items queued on the worker. */
  queued: number
  /** Ms until the batch of a new item of a tenant with nothing queued would start. */
  waitMs: number
  /** Ms that batch would run (the cost model's upper estimate). */
  serviceMs: number
  /**
   * Ms each more queued item adds to the wait (a full batch's upper cost per item over the
   * executors): the gateway adds it per request it sent since the estimate came. Absent (older
   * workers): nothing is added.
   */
  itemMs?: number
  /**
   * Ms a new item would run alone (the learned estimate of t(1), not its upper bound): the gateway answers a request whose
   * deadline is shorter 400 DEADLINE_TOO_SHORT without sending it. Absent (older workers): the
   * worker judges it.
   */
  aloneMs?: number
  /**
   * `waitMs` per tenant (fair shares put a tenant's new item behind its own queued items): in a
   * heartbeat the tenants with the most items queued, in an accept notice the pack's tenants; at
   * most {@link MAX_WAIT_TENANTS}. A tenant not listed: `waitMs`.
   */
  tenants?: Record<string, number>
}

/** Most tenants in {@link WaitEstimate.tenants} (those with the most items queued). */
export const MAX_WAIT_TENANTS = 16

/**
 * Version of the gateway<->worker protocol (docs/protocol.md#protocol-v2). Version 1 is one NATS
 * request per inference request, answered by one reply, with an acceptance notice on the request's
 * `ack` subject. Version 2 adds packs: several requests in one message ({@link InferPack}) published
 * with a reply subject under the gateway's inbox, answered there by acceptance notices and reply
 * packs ({@link GatewayNotice}). Workers announce the highest version they speak in their heartbeats
 * (`proto`); a gateway sends version 2 only while every worker it hears speaks it.
 */
export const PROTOCOL_VERSION = 2

/** Several requests for one model in one message (protocol v2), on `cohort.infer.<model>`. */
export interface InferPack {
  v: 2
  /** The requests (each a version-1 {@link InferRequest} without `ack`). */
  reqs: InferRequest[]
}

/**
 * What a worker publishes on the reply subject of an {@link InferPack} (protocol v2): one `accept`
 * per pack at once (the worker that took it), then `replies` for the requests of the pack, each
 * request's reply exactly once, the replies of one batch in one message.
 */
export type GatewayNotice =
  | {
      v: 2
      t: 'accept'
      /** Id of the worker that took the pack. */
      worker: string
      /** Ids of the requests it took. */
      ids: string[]
      /** Items queued on that worker after taking them (for admission at the gateway). */
      queued?: number
      /** The worker's estimate of the queue wait of a new item, ms ({@link WaitEstimate.waitMs}; for admission at the gateway). */
      waitMs?: number
      /** {@link WaitEstimate.serviceMs}; sent with `waitMs`. */
      serviceMs?: number
      /** {@link WaitEstimate.itemMs}; sent with `waitMs`. */
      itemMs?: number
      /** {@link WaitEstimate.aloneMs}; sent with `waitMs`. */
      aloneMs?: number
      /** {@link WaitEstimate.tenants}, for the tenants of the pack. */
      tenants?: Record<string, number>
    }
  | {
      v: 2
      t: 'replies'
      replies: InferReply[]
    }
  | {
      v: 2
      /** Token deltas of streamed generations: one message per engine step per pack, never per token. */
      t: 'tokens'
      steps: TokenStep[]
    }
