import { describe, expect, it } from 'vitest'
import { ROOT_CONTEXT, TraceFlags, createTraceState, defaultTextMapGetter, defaultTextMapSetter, trace } from '@opentelemetry/api'
import { W3CTraceContext, carrierOf, contextFromCarrier, formatTraceparent, parseTraceparent, traceIdOf } from './trace-context.ts'
import { defaultTracer, startChildSpan, startLinkedSpan } from './spans.ts'

const TID = '0af7651916cd43dd8448eb211c80319c'
const SID = 'b7ad6b7169203331'
const TP = `00-${TID}-${SID}-01`

describe('W3C traceparent', () => {
  it('parses the spec example into a remote, sampled span context and writes it back', () => {
    const sc = parseTraceparent(TP)
    expect(sc).toEqual({ traceId: TID, spanId: SID, traceFlags: TraceFlags.SAMPLED, isRemote: true })
    expect(formatTraceparent(sc!)).toBe(TP)
    expect(formatTraceparent({ traceId: TID, spanId: SID, traceFlags: 0 })).toBe(`00-${TID}-${SID}-00`)
    expect(formatTraceparent({ traceId: TID, spanId: SID, traceFlags: 0x2b })).toBe(`00-${TID}-${SID}-2b`)
  })

  it('keeps tracestate', () => {
    const sc = parseTraceparent(TP, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')
    expect(sc?.traceState?.get('rojo')).toBe('00f067aa0ba902b7')
    expect(carrierOf(sc)).toEqual({ traceparent: TP, tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' })
  })

  it.each([
    ['', 'empty'],
    [`ff-${TID}-${SID}-01`, 'version ff'],
    [`00-${'0'.repeat(32)}-${SID}-01`, 'zero trace id'],
    [`00-${TID}-${'0'.repeat(16)}-01`, 'zero parent id'],
    [`00-${TID.toUpperCase()}-${SID}-01`, 'upper case'],
    [`00-${TID}-${SID}-01-extra`, 'version 00 with more fields'],
    [`00-${TID.slice(1)}-${SID}-01`, 'short trace id'],
    [`00_${TID}_${SID}_01`, 'wrong separators'],
    ['x'.repeat(600), 'too long'],
  ])('rejects %j (%s)', (tp) => {
    expect(parseTraceparent(tp)).toBeUndefined()
    expect(contextFromCarrier({ traceparent: tp })).toBe(ROOT_CONTEXT)
  })

  it('accepts a later version with extra fields (reading the first four)', () => {
    expect(parseTraceparent(`01-${TID}-${SID}-01-what-ever`)?.spanId).toBe(SID)
  })

  it('as a TextMapPropagator: extract then inject round-trips', () => {
    const p = new W3CTraceContext()
    const ctx = p.extract(ROOT_CONTEXT, { traceparent: TP, tracestate: 'a=1' }, defaultTextMapGetter)
    expect(trace.getSpanContext(ctx)?.traceId).toBe(TID)
    const out: Record<string, string> = {}
    p.inject(ctx, out, defaultTextMapSetter)
    expect(out).toEqual({ traceparent: TP, tracestate: 'a=1' })
    const none: Record<string, string> = {}
    p.inject(ROOT_CONTEXT, none, defaultTextMapSetter)
    expect(none).toEqual({})
    expect(p.fields()).toEqual(['traceparent', 'tracestate'])
  })
})

describe('spans with the no-op tracer (no SDK registered)', () => {
  const tracer = defaultTracer()

  it('a span without a parent has no valid context: nothing goes into the envelope', () => {
    const span = startChildSpan(tracer, 'x', undefined)
    expect(span.isRecording()).toBe(false)
    expect(carrierOf(span)).toBeUndefined()
    expect(traceIdOf(span)).toBeUndefined()
  })

  it('a span under an incoming traceparent passes that context through unchanged', () => {
    const span = startChildSpan(tracer, 'x', { traceparent: TP, tracestate: 'k=v' })
    expect(span.isRecording()).toBe(false)
    expect(carrierOf(span)).toEqual({ traceparent: TP, tracestate: 'k=v' })
    expect(traceIdOf(span)).toBe(TID)
  })

  it('accepts a span, a span context or a context as the parent', () => {
    const sc = parseTraceparent(TP)!
    const parentSpan = trace.wrapSpanContext(sc)
    for (const parent of [parentSpan, sc, trace.setSpanContext(ROOT_CONTEXT, sc)]) {
      expect(startChildSpan(tracer, 'stage', parent).spanContext().traceId).toBe(TID)
    }
    expect(startLinkedSpan(tracer, 'batch', [{ context: sc }]).spanContext().traceId).not.toBe(TID)
    expect(createTraceState('a=1').serialize()).toBe('a=1')
  })
})
