import type { Context, MiddlewareHandler } from 'hono'
import { SpanKind, type Span } from '@opentelemetry/api'
import { CohortError, statusOf, type InferRequest } from '@cohort/protocol'
import { ATTR, SPAN, carrierOf, setSpanError, startChildSpan, traceIdOf, type LogFields, type TraceCarrier } from '@cohort/observability'
import type { ResolvedGatewayOptions } from './options.ts'
import { headerOf } from './request-header.ts'

/** What an observation needs of the gateway's options. */
export type ObservationOptions = Pick<ResolvedGatewayOptions, 'tracer' | 'logger' | 'onUnexpectedError'>

/** The call as the transport saw it: method and route for the span, the caller's W3C trace context. */
export interface ObservedCall {
  method: string
  route: string
  traceparent?: string | undefined
  tracestate?: string | undefined
  /** The envelope id to use (HTTP: the `x-request-id` the gateway answers). @default random */
  requestId?: string | undefined
  /** The caller's own request id (`x-request-id`), logged as `clientRequestId`. */
  clientRequestId?: string | undefined
}

const SERVER = { kind: SpanKind.SERVER }

declare module 'hono' {
  interface ContextVariableMap {
    /** The request id answered in `x-request-id`: the client's (`own: false`) or the gateway's. */
    cohortRequestId: { value: string; own: boolean } | undefined
    /** The gateway span's `traceparent`, answered on the response when the request is traced. */
    cohortTraceparent: string | undefined
    /** The route put `x-request-id` and `traceparent` on its response already ({@link responseIdHeaders}). */
    cohortIdsAnswered: boolean | undefined
  }
}

/** A client's `x-request-id` worth echoing: 1-128 visible ASCII characters. */
export const REQUEST_ID_RE = /^[\x21-\x7e]{1,128}$/

/**
 * `x-request-id` and `traceparent` on every response: the client's `x-request-id` echoed (else the
 * gateway's own id, the envelope id in its logs), and the gateway span's W3C `traceparent` when
 * the request is traced (an OpenTelemetry SDK is registered, or the caller sent a `traceparent`).
 * The app's one entry middleware, so it also runs `arrive` (the runtime adapter's readings) first
 * and closes the connection of an answer given while `draining()`: each Hono middleware is a
 * dispatch and an async frame per request.
 */
export function responseIds(o: { arrive?: (c: Context) => void; draining?: () => boolean } = {}): MiddlewareHandler {
  const { arrive, draining } = o
  return async (c, next) => {
    arrive?.(c)
    const theirs = headerOf(c, 'x-request-id')
    const id = theirs !== undefined && REQUEST_ID_RE.test(theirs) ? { value: theirs, own: false } : { value: crypto.randomUUID(), own: true }
    c.set('cohortRequestId', id)
    await next()
    if (draining?.() === true) {
      c.header('connection', 'close')
    }
    if (c.get('cohortIdsAnswered') === true && c.res.status < 400) {
      return // the route's own response carries them (an error answered since then did not)
    }
    setResponseHeader(c, 'x-request-id', id.value)
    const tp = c.get('cohortTraceparent')
    if (tp) {
      setResponseHeader(c, 'traceparent', tp)
    }
  }
}

/**
 * The headers {@link responseIds} would set after the route, for a route that builds its response
 * with them: a response built with plain headers is written by @hono/node-server without a Web
 * `Headers`, which setting one afterwards builds (about 2% of a request's CPU in `cohort serve`).
 */
export function responseIdHeaders(c: Context, headers: Record<string, string>): Record<string, string> {
  const id = c.get('cohortRequestId')
  if (id === undefined) {
    return headers
  }
  headers['x-request-id'] = id.value
  const tp = c.get('cohortTraceparent')
  if (tp) {
    headers['traceparent'] = tp
  }
  c.set('cohortIdsAnswered', true)
  return headers
}

/**
 * Set a header on the finished response in place. Hono's `c.header()` after the handler re-creates
 * the response around its body as a stream (it reads `bodyUsed`), so @hono/node-server can no
 * longer write a string body in one go: it reads the stream, a few promises per response and at
 * times a timer (docs/architecture.md#per-request-budgets). Headers of a response that cannot be
 * changed in place (immutable, as `fetch()` answers) still go through `c.header()`.
 */
function setResponseHeader(c: Context, name: string, value: string): void {
  try {
    c.res.headers.set(name, value)
  } catch {
    c.header(name, value)
  }
}

/**
 * Tracing and logging of one inference request (HTTP or gRPC) at the gateway: the `cohort.gateway.infer`
 * SERVER span (child of the caller's W3C `traceparent`), the trace fields its envelopes carry to the
 * workers, and the log line of a failure (`warn` for a CohortError, `error` for anything else).
 * With the default no-op tracer this costs one non-recording span and this object.
 */
export class RequestObservation {
  readonly span: Span
  /** The envelope id of the request (bulk: of the HTTP request; each item has its own too). */
  readonly requestId: string
  /** Items (predictions) sent; recorded on the span. */
  items = 0
  #status = 200
  #code = 'OK'
  #ended = false
  readonly #clientRequestId: string | undefined

  constructor(
    readonly o: ObservationOptions,
    call: ObservedCall,
    public model: string,
  ) {
    this.requestId = call.requestId ?? crypto.randomUUID()
    this.#clientRequestId = call.clientRequestId
    const { traceparent, tracestate } = call
    let parent: TraceCarrier | undefined
    if (traceparent) {
      parent = tracestate ? { traceparent, tracestate } : { traceparent }
    }
    this.span = startChildSpan(o.tracer, SPAN.gatewayInfer, parent, SERVER)
    if (this.span.isRecording()) {
      this.span.setAttributes({
        [ATTR.httpMethod]: call.method,
        [ATTR.httpRoute]: call.route,
        [ATTR.requestId]: this.requestId,
      })
    }
  }

  /** The W3C fields to put in an envelope: the gateway span as the worker's parent. */
  get trace(): TraceCarrier | undefined {
    return carrierOf(this.span)
  }

  /** The trace id for log lines (undefined without a trace). */
  get traceId(): string | undefined {
    return traceIdOf(this.span)
  }

  /** Count the items of an envelope (for the span). */
  sent(req: InferRequest): void {
    if (this.span.isRecording()) {
      const first = req.tensors ? Object.values(req.tensors)[0] : undefined
      this.items += first ? (first.shape[0] ?? 0) : (req.items?.length ?? 0)
    }
  }

  /**
   * Record a failed request and return what to throw: the CohortError itself (logged at `warn` with
   * code, status, model, requestId, traceId), or for an unexpected error an INTERNAL CohortError
   * after reporting the original once through `onUnexpectedError` (logged at `error`).
   * `status` overrides the HTTP status answered (Cog-style 422).
   */
  fail(e: unknown, status?: number): CohortError {
    const ce = e instanceof CohortError ? e : new CohortError('INTERNAL', 'internal error')
    this.#code = ce.code
    this.#status = status ?? ce.status
    const fields = this.fields({ code: ce.code, status: this.#status })
    if (e instanceof CohortError) {
      this.o.logger.warn({ ...fields, error: ce.message }, 'request failed')
    } else {
      this.o.onUnexpectedError(e, fields)
    }
    return ce
  }

  /**
   * Record a refusal for load (503 OVERLOADED) without a log line: the caller counts it (the
   * door's aggregated {@link RefusalLog}). Answers the error to throw.
   */
  refused(e: CohortError): CohortError {
    this.#code = e.code
    this.#status = e.status
    return e
  }

  /** Log a failed item of a bulk request (its own envelope id) at `warn`. */
  failedItem(requestId: string, index: number, code: string, message: string): void {
    this.o.logger.warn({ ...this.fields({ code, status: statusOf(code) }), requestId, index, error: message }, 'bulk item failed')
  }

  /** Log fields of this request: model, requestId, traceId and `extra`. */
  fields(extra?: LogFields): LogFields {
    const traceId = this.traceId
    const client = this.#clientRequestId
    return { model: this.model, requestId: this.requestId, ...(client ? { clientRequestId: client } : {}), ...(traceId ? { traceId } : {}), ...extra }
  }

  /** End the span with the outcome. Idempotent. */
  end(): void {
    if (this.#ended) {
      return
    }
    this.#ended = true
    const span = this.span
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.model]: this.model, [ATTR.items]: this.items, [ATTR.httpStatus]: this.#status })
      if (this.#code !== 'OK') {
        // Server-span convention: 5xx is an error of this span, 4xx only records the code.
        setSpanError(span, this.#code, undefined, this.#status >= 500)
      }
    }
    span.end()
  }
}
