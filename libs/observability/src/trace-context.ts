/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): `traceparent` and `tracestate`, parsed
 * into an OpenTelemetry remote span context and written back, with only `@opentelemetry/api`.
 * The same two strings travel in the HTTP headers and in the envelope (`InferRequest.traceparent`,
 * `.tracestate`), so a trace crosses the bus whatever the transport.
 * @module
 */
import {
  ROOT_CONTEXT,
  createTraceState,
  isSpanContextValid,
  trace,
  type Context,
  type Span,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api'

/** The two W3C fields, as in HTTP headers and in the envelope. */
export interface TraceCarrier {
  traceparent?: string
  tracestate?: string
}

export const TRACEPARENT = 'traceparent'
export const TRACESTATE = 'tracestate'

/** True when s[from, to) is lowercase hex, and (with `nonZero`) not all zeros. */
function isHex(s: string, from: number, to: number, nonZero: boolean): boolean {
  let zero = true
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    if (c === 48) {
      continue
    }
    zero = false
    if (!((c > 48 && c <= 57) || (c >= 97 && c <= 102))) {
      return false
    }
  }
  return !(nonZero && zero)
}

/**
 * Parse a `traceparent` (and optional `tracestate`) into a remote span context; undefined when the
 * header is absent or invalid (an invalid one is ignored, as the spec says: a new trace starts).
 */
export function parseTraceparent(traceparent: string | null | undefined, tracestate?: string | null): SpanContext | undefined {
  if (!traceparent || traceparent.length > 512) {
    return undefined
  }
  const tp = traceparent.trim()
  // version (2 hex, not ff) - trace-id (32 hex, not all zero) - parent-id (16 hex, not all zero) -
  // flags (2 hex); version 00 has exactly these 55 characters, later versions may append "-...".
  if (tp.length < 55 || tp.charCodeAt(2) !== 45 || tp.charCodeAt(35) !== 45 || tp.charCodeAt(52) !== 45) {
    return undefined
  }
  const version = tp.slice(0, 2)
  if (!isHex(tp, 0, 2, false) || version === 'ff' || (version === '00' ? tp.length !== 55 : tp.length > 55 && tp.charCodeAt(55) !== 45)) {
    return undefined
  }
  if (!isHex(tp, 3, 35, true) || !isHex(tp, 36, 52, true) || !isHex(tp, 53, 55, false)) {
    return undefined
  }
  const sc: SpanContext = {
    traceId: tp.slice(3, 35),
    spanId: tp.slice(36, 52),
    traceFlags: parseInt(tp.slice(53, 55), 16),
    isRemote: true,
  }
  if (tracestate) {
    sc.traceState = createTraceState(tracestate)
  }
  return sc
}

/** The `traceparent` of a span context (version 00). */
export function formatTraceparent(sc: SpanContext): string {
  const flags = sc.traceFlags & 0xff
  return `00-${sc.traceId}-${sc.spanId}-${flags < 16 ? '0' : ''}${flags.toString(16)}`
}

/**
 * An OpenTelemetry context whose parent is the remote span of `carrier`; `base` (the root context by
 * default, allocation-free) when it carries no valid `traceparent`.
 */
export function contextFromCarrier(carrier: TraceCarrier | undefined, base: Context = ROOT_CONTEXT): Context {
  const sc = carrier?.traceparent ? parseTraceparent(carrier.traceparent, carrier.tracestate) : undefined
  return sc ? trace.setSpanContext(base, sc) : base
}

/**
 * The W3C fields that make `span` the parent of the next hop; undefined for an invalid context
 * (no-op tracer and no incoming trace), so nothing is added to the envelope.
 */
export function carrierOf(span: Span | SpanContext | undefined): TraceCarrier | undefined {
  if (!span) {
    return undefined
  }
  const sc = 'spanContext' in span ? span.spanContext() : span
  if (!isSpanContextValid(sc)) {
    return undefined
  }
  const state = sc.traceState?.serialize()
  return state ? { traceparent: formatTraceparent(sc), tracestate: state } : { traceparent: formatTraceparent(sc) }
}

/** The trace id of a span, or undefined when it has none (no-op tracer, no incoming trace). */
export function traceIdOf(span: Span | undefined): string | undefined {
  const sc = span?.spanContext()
  return sc && isSpanContextValid(sc) ? sc.traceId : undefined
}

/**
 * The W3C propagator as an OpenTelemetry `TextMapPropagator` (for HTTP clients, or
 * `propagation.setGlobalPropagator`), built on the functions above.
 */
export class W3CTraceContext implements TextMapPropagator {
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const sc = trace.getSpanContext(context)
    const fields = sc ? carrierOf(sc) : undefined
    if (!fields?.traceparent) {
      return
    }
    setter.set(carrier, TRACEPARENT, fields.traceparent)
    if (fields.tracestate) {
      setter.set(carrier, TRACESTATE, fields.tracestate)
    }
  }

  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const one = (k: string) => {
      const v = getter.get(carrier, k)
      return Array.isArray(v) ? (k === TRACESTATE ? v.join(',') : v[0]) : v
    }
    const sc = parseTraceparent(one(TRACEPARENT), one(TRACESTATE))
    return sc ? trace.setSpanContext(context, sc) : context
  }

  fields(): string[] {
    return [TRACEPARENT, TRACESTATE]
  }
}
