/**
 * Tracing and logging seams shared by the gateway and the worker: the minimal {@link Logger}
 * interface (pino fits it; libs never import pino), W3C trace context in the envelope, span names and
 * attributes, and the span helpers. Only `@opentelemetry/api` is used: without a registered SDK every
 * span is a no-op. See docs/observability.md.
 * @module
 */
export * from './logger.ts'
export * from './trace-context.ts'
export * from './spans.ts'
