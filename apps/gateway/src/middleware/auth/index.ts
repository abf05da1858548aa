import type { Context, MiddlewareHandler } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { ResolvedGatewayOptions } from '../../options.ts'
import { Authenticator } from './credentials.ts'
import { headerOf } from '../../request-header.ts'

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * Who made the request, set by the authentication middleware: `key:<index>` for an API key
     * (never the key itself), `jwt:<sub>` for a token. The rate limiter keys its buckets on it.
     */
    cohortClient: string | undefined
  }
}

/**
 * Routes that never need credentials: liveness and readiness probes, and the dashboard's page and
 * assets (static, no data: the page asks for a key and sends it to `/dashboard/data`, which is closed).
 */
export const OPEN_PATHS: ReadonlySet<string> = new Set(['/v2/health/live', '/v2/health/ready', '/dashboard', '/dashboard/', '/dashboard/app.js', '/dashboard/app.css'])

/**
 * True for the admin routes, which check `adminKeys` themselves (routes/admin.ts): `/admin/...`
 * and the model repository extension `/v2/repository/...` (routes/repository.ts).
 */
export function isAdminPath(path: string): boolean {
  return path === '/admin' || path.startsWith('/admin/') || path.startsWith('/v2/repository/')
}

/**
 * Authentication: `Authorization: Bearer <credential>`, where the credential is one of `apiKeys`
 * or a JWT that verifies against `jwt`. `undefined` (no middleware) when neither is configured.
 *
 * - Health probes (`/v2/health/live`, `/v2/health/ready`) stay open; `/metrics` too with `metricsOpen`.
 * - Admin routes are left to their own `adminKeys` check: an API key or token never opens them.
 *   With authentication on and no admin keys they are closed (403) rather than open.
 * - Missing or malformed header, unknown key, invalid token: 401 `UNAUTHORIZED`
 *   (`WWW-Authenticate: Bearer`); a valid token without the required scope: 403 `FORBIDDEN`.
 */
export function authMiddleware(o: ResolvedGatewayOptions): MiddlewareHandler | undefined {
  const auth = Authenticator.of(o)
  if (!auth) {
    return undefined
  }
  const adminClosed = !o.adminKeys || o.adminKeys.length === 0
  return async (c: Context, next) => {
    const path = c.req.path
    if (OPEN_PATHS.has(path) || (o.metricsOpen === true && path === '/metrics')) {
      return next()
    }
    if (isAdminPath(path)) {
      if (adminClosed) {
        throw new CohortError('FORBIDDEN', 'admin routes are closed: authentication is on and no admin key is set (--admin-key)')
      }
      return next()
    }
    c.set('cohortClient', await auth.authenticate(headerOf(c, 'authorization')))
    return next()
  }
}
