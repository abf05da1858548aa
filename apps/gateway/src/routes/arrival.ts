import type { Context } from 'hono'
import type { Arrival } from '../door.ts'
import type { Admission } from '../admission.ts'
import type { Origin } from '../admission.ts'
import { headerOf } from '../request-header.ts'
import { routePath } from 'hono/route'
import { TRACEPARENT, TRACESTATE } from '@cohort/observability'

declare module 'hono' {
  interface ContextVariableMap {
    /** When the request arrived (`performance.now()` ms), from the runtime adapter's `arrivedAt`. */
    cohortArrivedAt: number | undefined
    /** The door's admission of an infer request judged at the listener (early.ts), from the runtime adapter. */
    cohortAdmission: Admission | undefined
  }
}

function waitedSince(at: number | undefined): number | undefined {
  return at === undefined ? undefined : performance.now() - at
}

/**
 * The door's {@link Arrival} of an HTTP request: its origin, method, route, model, trace context and
 * timeout header. `route`: the route's pattern when the matched one is not it (bulk, app.ts's router note).
 */
export function httpArrival(c: Context, origin: Origin, model: string, version?: string, route?: string): Arrival {
  // One literal of one shape (the ObservedCall fields with the rest, no spreads): spreads built it
  // property by property, 2.3 KB per request (docs/bench/gc-2026-12-03.md).
  const id = c.get('cohortRequestId')
  return {
    method: c.req.method,
    route: route ?? routePath(c),
    traceparent: headerOf(c, TRACEPARENT),
    tracestate: headerOf(c, TRACESTATE),
    requestId: id?.own === true ? id.value : undefined,
    clientRequestId: id?.own === false ? id.value : undefined,
    origin,
    model,
    version,
    timeoutHeader: headerOf(c, 'x-cohort-timeout-ms'),
    ttftHeader: headerOf(c, 'x-cohort-ttft-timeout-ms'),
    tenant: c.get('cohortClient'),
    waitedMs: waitedSince(c.get('cohortArrivedAt')),
    entered: (p) => c.set('cohortTraceparent', p.trace?.traceparent),
    // Judged at the listener: only the infer route's, which is all early.ts judges.
    admission: origin === 'infer' ? c.get('cohortAdmission') : undefined,
  }
}
