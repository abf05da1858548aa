import type { Context } from 'hono'
import type { Arrival } from '../door.ts'
import type { Origin } from '../admission.ts'
import { httpCall } from '../observe.ts'

/** The door's {@link Arrival} of an HTTP request: its origin, method, route, model, trace context and timeout header. */
export function httpArrival(c: Context, origin: Origin, model: string, version?: string): Arrival {
  return {
    ...httpCall(c),
    origin,
    model,
    ...(version !== undefined ? { version } : {}),
    timeoutHeader: c.req.header('x-cohort-timeout-ms'),
    ttftHeader: c.req.header('x-cohort-ttft-timeout-ms'),
    tenant: c.get('cohortClient'),
    entered: (p) => c.set('cohortTraceparent', p.trace?.traceparent),
  }
}
