import type { MiddlewareHandler } from 'hono'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { InferenceDoor } from '../door.ts'
import { authMiddleware } from './auth/index.ts'
import { corsMiddleware } from './cors/index.ts'
import { rateLimitMiddleware } from './rate-limit/index.ts'
import { inflightMiddleware } from './inflight/index.ts'

/**
 * The gateway's middleware chain, applied to every route in order (security, limits, CORS...).
 * Each middleware lives in its own folder under `middleware/`.
 */
export function gatewayMiddleware(o: ResolvedGatewayOptions, door: InferenceDoor): MiddlewareHandler[] {
  // CORS first (preflights and error responses get its headers), then who is calling, then how
  // often, then whether the gateway holds room for one more body (the door's in-flight bound).
  const security = [corsMiddleware(o), authMiddleware(o), rateLimitMiddleware(o), inflightMiddleware(door.inflight)]
  return security.filter((m): m is MiddlewareHandler => m !== undefined)
}
