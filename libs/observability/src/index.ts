/**
 * Tracing and logging seams shared by the gateway and the worker: the minimal {@link Logger}
 * interface (pino fits it; libs never import pino), W3C trace context in the envelope, span names and
 * attributes, and the span helpers. Only `@opentelemetry/api` is used: without a registered SDK every
 * span is a no-op. See docs/observability.md.
 * @module
 */
export { consoleErrorLogger, type LogFields, type Logger, noopLogger } from './logger.ts'
export {
  carrierOf,
  contextFromCarrier,
  formatTraceparent,
  parseTraceparent,
  type TraceCarrier,
  traceIdOf,
  TRACEPARENT,
  TRACESTATE,
  W3CTraceContext,
} from './trace-context.ts'
export { ATTR, defaultTracer, linkTo, setSpanError, SPAN, type SpanParent, startChildSpan, startLinkedSpan, TRACER_NAME } from './spans.ts'
