/**
 * Span names, attribute keys and the helpers every Cohort span is started with. A request is traced
 * as: `cohort.gateway.infer` (SERVER, child of the HTTP caller's `traceparent`) → one
 * `cohort.worker.request` per envelope (CONSUMER, child of the gateway span through the envelope's
 * `traceparent`), and each executed batch is a `cohort.worker.batch` span (a new trace) with one
 * **link** per request it carried: a batch has many parents. A pipeline stage is a child of its
 * request span: `startChildSpan(tracer, 'cohort.stage.<name>', requestSpan)`.
 * @module
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type Tracer,
} from '@opentelemetry/api'
import { contextFromCarrier, type TraceCarrier } from './trace-context.ts'

/** Instrumentation scope name of Cohort's tracer. */
export const TRACER_NAME = 'cohort'

/** The span names. */
export const SPAN = {
  /** One per inference HTTP request at the gateway (OIP infer, predictions, bulk). SERVER. */
  gatewayInfer: 'cohort.gateway.infer',
  /** One per envelope at the worker: from receipt to reply (queue + compute). CONSUMER. */
  workerRequest: 'cohort.worker.request',
  /** One per executed batch, linked to the request spans of its items. INTERNAL. */
  workerBatch: 'cohort.worker.batch',
} as const

/** Attribute keys (OpenTelemetry semantic conventions where one exists, `cohort.*` otherwise). */
export const ATTR = {
  model: 'cohort.model',
  /** Items (predictions) in the request, or carried by a link. */
  items: 'cohort.items',
  /** The envelope id (`InferRequest.id`). */
  requestId: 'cohort.request.id',
  /** The error code (docs/errors.md) of a failed request or batch. */
  errorCode: 'cohort.error.code',
  workerId: 'cohort.worker.id',
  batchSize: 'cohort.batch.size',
  /** Why the batch was dispatched: idle, full, timer, deadline. */
  batchReason: 'cohort.batch.reason',
  /** Wall time of the batch's run (the predictor or ORT call), ms. */
  computeMs: 'cohort.batch.compute_ms',
  /** Time the item waited in the worker's queue before its batch started, ms. */
  queueMs: 'cohort.queue_ms',
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  /** Semantic-convention error class: the error code. */
  errorType: 'error.type',
} as const

/** Cohort's default tracer: the global provider's, a no-op unless an SDK is registered. */
export function defaultTracer(): Tracer {
  return trace.getTracer(TRACER_NAME)
}

/** What a span can be a child of: a span, a span context, an OpenTelemetry context, or W3C fields. */
export type SpanParent = Span | SpanContext | Context | TraceCarrier | undefined

function parentContext(parent: SpanParent): Context {
  if (!parent) {
    return ROOT_CONTEXT
  }
  if ('getValue' in parent && typeof parent.getValue === 'function') {
    return parent
  }
  if ('spanContext' in parent && typeof parent.spanContext === 'function') {
    return trace.setSpan(ROOT_CONTEXT, parent)
  }
  if ('traceId' in parent) {
    return trace.setSpanContext(ROOT_CONTEXT, parent)
  }
  return contextFromCarrier(parent as TraceCarrier)
}

/**
 * Start `name` as a child of `parent` (no parent: a new trace). The same call serves every level:
 * the worker's request span (parent: the envelope's W3C fields) and a pipeline stage (parent: the
 * request span). With a no-op tracer this allocates one non-recording span and nothing else.
 */
export function startChildSpan(tracer: Tracer, name: string, parent: SpanParent, options?: SpanOptions): Span {
  return tracer.startSpan(name, options, parentContext(parent))
}

/**
 * Start `name` as the root of a new trace, linked to `links` (fan-in: a batch linked to the request
 * spans of its items). Pass links already built, or add them after start with `span.addLinks` once
 * `span.isRecording()` says they are wanted.
 */
export function startLinkedSpan(tracer: Tracer, name: string, links: Link[] | undefined, options?: SpanOptions): Span {
  const o = links || options ? { kind: SpanKind.INTERNAL, ...options, root: true, ...(links ? { links } : {}) } : ROOT_SPAN
  return tracer.startSpan(name, o, ROOT_CONTEXT)
}

const ROOT_SPAN: SpanOptions = { kind: SpanKind.INTERNAL, root: true }

/** A link to `span` (or a span context), with optional attributes. */
export function linkTo(span: Span | SpanContext, attributes?: Attributes): Link {
  const context = 'spanContext' in span && typeof span.spanContext === 'function' ? span.spanContext() : (span as SpanContext)
  return attributes ? { context, attributes } : { context }
}

/**
 * Mark a span failed with an error code (and message): `cohort.error.code`, `error.type`, status
 * ERROR. `asError` false records the code without the ERROR status (a client error seen by a
 * server span, per the HTTP conventions).
 */
export function setSpanError(span: Span, code: string, message?: string, asError = true): void {
  if (!span.isRecording()) {
    return
  }
  span.setAttribute(ATTR.errorCode, code)
  span.setAttribute(ATTR.errorType, code)
  if (asError) {
    span.setStatus(message ? { code: SpanStatusCode.ERROR, message } : { code: SpanStatusCode.ERROR })
  }
}
