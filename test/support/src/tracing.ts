import type { Tracer } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'

/** An OpenTelemetry SDK tracer that keeps finished spans in memory (no global registration). */
export interface MemoryTracing {
  tracer: Tracer
  exporter: InMemorySpanExporter
  provider: BasicTracerProvider
  /** Finished spans, optionally only those named `name`. */
  spans(name?: string): ReadableSpan[]
  shutdown(): Promise<void>
}

/**
 * A tracer for tests: `BasicTracerProvider` + `SimpleSpanProcessor` + `InMemorySpanExporter`, passed
 * to the gateway or worker as their `tracer` option, so nothing leaks between tests through the
 * global provider.
 */
export function memoryTracing(): MemoryTracing {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  return {
    tracer: provider.getTracer('cohort'),
    exporter,
    provider,
    spans: (name) => exporter.getFinishedSpans().filter((s) => name === undefined || s.name === name),
    shutdown: () => provider.shutdown(),
  }
}

/** A random W3C traceparent (sampled) and its ids. */
export function newTraceparent(): { traceparent: string; traceId: string; spanId: string } {
  const hex = (n: number) => Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, '0')).join('')
  const traceId = hex(16)
  const spanId = hex(8)
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId }
}
