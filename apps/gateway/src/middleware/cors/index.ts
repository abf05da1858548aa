import type { MiddlewareHandler } from 'hono'
import { cors } from 'hono/cors'
import type { ResolvedGatewayOptions } from '../../options.ts'

/** Request headers a browser client of the gateway may send. */
export const CORS_ALLOW_HEADERS = ['authorization', 'content-type', 'accept', 'inference-header-content-length', 'x-cohort-timeout-ms', 'x-cohort-ttft-timeout-ms']
/** Response headers a browser client may read. */
export const CORS_EXPOSE_HEADERS = ['retry-after', 'inference-header-content-length', 'www-authenticate']

/**
 * CORS (`hono/cors`) for the configured origins; `undefined` (no middleware) when `cors` is not set.
 * It runs first, so that preflights (`OPTIONS`) are answered before authentication and error
 * responses (401, 429...) carry the CORS headers a browser needs to read them.
 */
export function corsMiddleware(o: ResolvedGatewayOptions): MiddlewareHandler | undefined {
  const c = o.cors
  if (!c || c.origins.length === 0) {
    return undefined
  }
  const any = c.origins.includes('*')
  if (any && c.credentials) {
    throw new RangeError('cors: origin "*" cannot be combined with credentials')
  }
  return cors({
    origin: any ? '*' : [...c.origins],
    allowMethods: ['GET', 'HEAD', 'POST', 'PUT', 'OPTIONS'],
    allowHeaders: CORS_ALLOW_HEADERS,
    exposeHeaders: CORS_EXPOSE_HEADERS,
    maxAge: c.maxAgeS ?? 600,
    ...(c.credentials ? { credentials: true } : {}),
  })
}
