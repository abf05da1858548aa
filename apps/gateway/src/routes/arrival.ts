import type { Context } from 'hono'
import type { Arrival } from '../door.ts'
import type { Admission } from '../admission.ts'
import type { Origin } from '../admission.ts'
import { headerOf } from '../request-header.ts'
import { httpCall } from '../observe.ts'

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

/** The door's {@link Arrival} of an HTTP request: its origin, method, route, model, trace context and timeout header. */
export function httpArrival(c: Context, origin: Origin, model: string, version?: string): Arrival {
  return {
    ...httpCall(c),
    origin,
    model,
    ...(version !== undefined ? { version } : {}),
    timeoutHeader: headerOf(c, 'x-cohort-timeout-ms'),
    ttftHeader: headerOf(c, 'x-cohort-ttft-timeout-ms'),
    tenant: c.get('cohortClient'),
    waitedMs: waitedSince(c.get('cohortArrivedAt')),
    entered: (p) => c.set('cohortTraceparent', p.trace?.traceparent),
    // Judged at the listener: only the infer route's, which is all early.ts judges.
    ...(origin === 'infer' ? { admission: c.get('cohortAdmission') } : {}),
  }
}
