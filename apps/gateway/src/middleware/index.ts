import type { MiddlewareHandler } from 'hono'
import type { ResolvedGatewayOptions } from '../options.ts'

/**
 * The gateway's middleware chain, applied to every route in order (security, limits, CORS...).
 * Each middleware lives in its own folder under `middleware/`.
 */
export function gatewayMiddleware(_o: ResolvedGatewayOptions): MiddlewareHandler[] {
  return []
}
