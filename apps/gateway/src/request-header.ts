import type { Context } from 'hono'
import type { RequestHeaders } from './options.ts'

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's headers as the runtime parsed them, from the runtime adapter's `headers` ({@link headerOf}). */
    cohortHeaders: RequestHeaders | undefined
  }
}

/**
 * A request header (`name` lower-case): from the runtime's own parse when its adapter gives it
 * (`GatewayAdapter.headers`), else `c.req.header`. On Node a first `c.req.header()` builds a Web
 * `Headers` of every header for each request (about 3% of a request's CPU in `cohort serve`).
 */
export function headerOf(c: Context, name: string): string | undefined {
  const h = c.get('cohortHeaders')
  if (h === undefined) {
    return c.req.header(name)
  }
  const v = h[name]
  return typeof v === 'string' ? v : v?.join(', ')
}
