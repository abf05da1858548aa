import type { MiddlewareHandler } from 'hono'
import type { ResolvedGatewayOptions } from '../options.ts'
import { authMiddleware } from './auth/index.ts'
import { corsMiddleware } from './cors/index.ts'
import { rateLimitMiddleware } from './rate-limit/index.ts'
import { inflightMiddleware } from './inflight/index.ts'

/**
 * The gateway's middleware chain, applied to every route in order (security, limits, CORS...).
 * Each middleware lives in its own folder under `middleware/`.
 */
export function gatewayMiddleware(o: ResolvedGatewayOptions): MiddlewareHandler[] {
  // CORS first (preflights and error responses get its headers), then who is calling, then how
  // often, then whether the gateway holds room for one more body.
  const security = [corsMiddleware(o), authMiddleware(o), rateLimitMiddleware(o), inflightMiddleware(o)]
  return security.filter((m): m is MiddlewareHandler => m !== undefined)
}
