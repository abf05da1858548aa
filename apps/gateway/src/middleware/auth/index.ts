import type { Context, MiddlewareHandler } from 'hono'
import { verify } from 'hono/jwt'
import { CohortError } from '@cohort/protocol'
import type { JwtAuthOptions, ResolvedGatewayOptions } from '../../options.ts'

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
export const OPEN_PATHS: ReadonlySet<string> = new Set([
  '/v2/health/live',
  '/v2/health/ready',
  '/dashboard',
  '/dashboard/',
  '/dashboard/app.js',
  '/dashboard/app.css',
])

/** True for the admin routes, which check `adminKeys` themselves (routes/admin.ts). */
export function isAdminPath(path: string): boolean {
  return path === '/admin' || path.startsWith('/admin/')
}

/** True when `s` and `t` are equal, in time that does not depend on where they differ. */
function sameString(s: string, t: string): boolean {
  if (s.length !== t.length) {
    return false
  }
  let diff = 0
  for (let i = 0; i < s.length; i++) {
    diff |= s.charCodeAt(i) ^ t.charCodeAt(i)
  }
  return diff === 0
}

/** The index of `cred` in `keys`, or -1; compares against every key. */
function keyIndex(keys: readonly string[], cred: string): number {
  let found = -1
  for (let i = 0; i < keys.length; i++) {
    if (sameString(keys[i]!, cred) && found < 0) {
      found = i
    }
  }
  return found
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

/** A short reason for a failed verification; hono's messages echo the token, these do not. */
function jwtReason(e: unknown): string {
  switch (e instanceof Error ? e.name : '') {
    case 'JwtTokenExpired':
      return 'token expired'
    case 'JwtTokenNotBefore':
      return 'token not valid yet'
    case 'JwtTokenSignatureMismatched':
      return 'bad signature'
    case 'JwtTokenIssuer':
      return 'wrong issuer'
    case 'JwtTokenAudience':
    case 'JwtPayloadRequiresAud':
      return 'wrong audience'
    case 'JwtAlgorithmMismatch':
    case 'JwtAlgorithmNotAllowed':
      return 'wrong algorithm'
    case 'JwtTokenIssuedAt':
      return 'issued in the future'
    default:
      return 'malformed token'
  }
}

/** The scopes of a token: `scope` (space-separated string) and `scp` (array or string). */
function scopesOf(payload: Record<string, unknown>): string[] {
  const out: string[] = []
  for (const v of [payload['scope'], payload['scp']]) {
    if (typeof v === 'string') {
      out.push(...v.split(' ').filter(Boolean))
    } else if (Array.isArray(v)) {
      out.push(...v.filter((x): x is string => typeof x === 'string'))
    }
  }
  return out
}

function unauthorized(message: string): CohortError {
  return new CohortError('UNAUTHORIZED', message)
}

/** Verify a JWT; returns the client id (`jwt:<sub>`). Throws UNAUTHORIZED or FORBIDDEN. */
async function verifyJwt(jwt: JwtAuthOptions, token: string): Promise<string> {
  let payload: Record<string, unknown>
  try {
    payload = await verify(token, jwt.secret, {
      alg: jwt.alg ?? 'HS256',
      ...(jwt.issuer !== undefined ? { iss: jwt.issuer } : {}),
      ...(jwt.audience !== undefined ? { aud: jwt.audience } : {}),
    })
  } catch (e) {
    throw unauthorized(`invalid token: ${jwtReason(e)}`)
  }
  if (jwt.scope !== undefined && !scopesOf(payload).includes(jwt.scope)) {
    throw new CohortError('FORBIDDEN', `token lacks the scope "${jwt.scope}"`)
  }
  const sub = payload['sub']
  // Tokens without a subject are told apart by their signature.
  return `jwt:${typeof sub === 'string' && sub !== '' ? sub : `~${token.slice(token.lastIndexOf('.') + 1, token.lastIndexOf('.') + 23)}`}`
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
  const keys = (o.apiKeys ?? []).filter((k) => k.length > 0)
  const jwt = o.jwt
  if (keys.length === 0 && !jwt) {
    return undefined
  }
  if (jwt && jwt.secret.length === 0) {
    throw new RangeError('jwt.secret must not be empty')
  }
  const adminClosed = !o.adminKeys || o.adminKeys.length === 0
  const expected = jwt && keys.length > 0 ? 'an API key or a token' : jwt ? 'a token' : 'an API key'
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
    const header = c.req.header('authorization')
    if (header === undefined || header.trim() === '') {
      throw unauthorized(`missing credentials: send Authorization: Bearer <${expected}>`)
    }
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
    if (!m) {
      throw unauthorized(`malformed Authorization header: expected Bearer <${expected}>`)
    }
    const cred = m[1]!
    const i = keys.length > 0 ? keyIndex(keys, cred) : -1
    if (i >= 0) {
      c.set('cohortClient', `key:${i}`)
      return next()
    }
    if (jwt && JWT_SHAPE.test(cred)) {
      c.set('cohortClient', await verifyJwt(jwt, cred))
      return next()
    }
    throw unauthorized(jwt ? (keys.length > 0 ? 'unknown API key or malformed token' : 'malformed token') : 'unknown API key')
  }
}
