import { SpanKind, type Link, type Span, type Tracer } from '@opentelemetry/api'
import type { InferReply, InferRequest } from '@cohort/protocol'
import { ATTR, SPAN, linkTo, setSpanError, startChildSpan, startLinkedSpan, traceIdOf, type Logger } from '@cohort/observability'

const CONSUMER = { kind: SpanKind.CONSUMER }

/** What the batch span needs of each item: its request's span and envelope (a queued item's `p`). */
export interface TracedItem {
  p: { span: Span; req: InferRequest }
}

/**
 * The worker's spans and log lines for one model: a `cohort.worker.request` span per envelope
 * (child of the envelope's `traceparent`: the gateway span) from receipt to reply, and a
 * `cohort.worker.batch` span per executed batch, linked to the request span of every request it
 * carried. With a no-op tracer each call makes one non-recording span and builds no attributes or
 * links. A pipeline stage would start its span with `startChildSpan(tracer, name, requestSpan)`.
 */
export class ModelTelemetry {
  constructor(
    readonly tracer: Tracer,
    readonly logger: Logger,
    readonly model: string,
    readonly workerId: string,
  ) {}

  /** Start the request span of an envelope (at receipt, before validation). */
  startRequest(req: InferRequest): Span {
    const span = startChildSpan(this.tracer, SPAN.workerRequest, req, CONSUMER)
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.model]: this.model, [ATTR.requestId]: req.id, [ATTR.workerId]: this.workerId })
    }
    return span
  }

  /** End a request span with the reply sent: item count, and the first error's code. */
  endRequest(span: Span | undefined, reply: InferReply, items: number): void {
    if (!span) {
      return
    }
    if (span.isRecording()) {
      span.setAttribute(ATTR.items, items)
      const err = reply.error ?? reply.errors?.find((e) => e)
      if (err) {
        setSpanError(span, err.code, err.message)
      }
    }
    span.end()
  }

  /**
   * Start the span of a batch about to run: a new trace with one link per distinct request among
   * `items` (link attributes: request id, items of that request in the batch, time queued).
   */
  startBatch(items: readonly TracedItem[], reason: string, queuedMs: readonly number[]): Span {
    const span = startLinkedSpan(this.tracer, SPAN.workerBatch, undefined)
    if (!span.isRecording()) {
      return span
    }
    span.setAttributes({
      [ATTR.model]: this.model,
      [ATTR.workerId]: this.workerId,
      [ATTR.batchSize]: items.length,
      [ATTR.batchReason]: reason,
    })
    const byRequest = new Map<Span, { n: number; queueMs: number; id: string }>()
    items.forEach(({ p }, k) => {
      const e = byRequest.get(p.span)
      const q = queuedMs[k] ?? 0
      if (e) {
        e.n++
        e.queueMs = Math.max(e.queueMs, q)
      } else {
        byRequest.set(p.span, { n: 1, queueMs: q, id: p.req.id })
      }
    })
    const links: Link[] = []
    for (const [reqSpan, e] of byRequest) {
      links.push(linkTo(reqSpan, { [ATTR.requestId]: e.id, [ATTR.items]: e.n, [ATTR.queueMs]: e.queueMs }))
      // And back: the request's trace shows which batch ran its items.
      if (reqSpan.isRecording()) {
        reqSpan.addLink(linkTo(span, { [ATTR.items]: e.n, [ATTR.queueMs]: e.queueMs }))
      }
    }
    span.addLinks(links)
    return span
  }

  /**
   * End a batch span. `error` set: the runner threw, which fails every item of the batch; logged at
   * `error` with the request ids (and trace ids) involved.
   */
  endBatch(span: Span, items: readonly TracedItem[], computeMs: number, reason: string, error?: { err: unknown; code: string; message: string }): void {
    if (span.isRecording()) {
      span.setAttribute(ATTR.computeMs, computeMs)
      if (error) {
        setSpanError(span, error.code, error.message)
        if (error.err instanceof Error) {
          span.recordException(error.err)
        }
      }
    }
    span.end()
    if (error) {
      const requestIds = [...new Set(items.map((i) => i.p.req.id))]
      const traceIds = [...new Set(items.map((i) => traceIdOf(i.p.span)).filter((t): t is string => t !== undefined))]
      this.logger.error(
        {
          model: this.model,
          workerId: this.workerId,
          batchSize: items.length,
          reason,
          computeMs,
          code: error.code,
          requestIds,
          ...(traceIds.length > 0 ? { traceIds } : {}),
          ...(traceIdOf(span) ? { batchTraceId: traceIdOf(span) } : {}),
          err: error.err,
        },
        'batch failed',
      )
    }
  }
}
