import type { Context } from 'hono'
import type { Arrival } from '../door.ts'
import { httpCall } from '../observe.ts'

/** The door's {@link Arrival} of an HTTP request: method, route, trace context and timeout header. */
export function httpArrival(c: Context, model: string): Arrival {
  return {
    ...httpCall(c),
    model,
    timeoutHeader: c.req.header('x-cohort-timeout-ms'),
    ttftHeader: c.req.header('x-cohort-ttft-timeout-ms'),
    tenant: c.get('cohortClient'),
    entered: (p) => c.set('cohortTraceparent', p.trace?.traceparent),
  }
}
