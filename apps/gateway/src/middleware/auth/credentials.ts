import { verify } from 'hono/jwt'
import { CohortError } from '@cohort/protocol'
import type { JwtAuthOptions } from '../../options.ts'

/** True when `s` and `t` are equal, in time that does not depend on where they differ. */
export function sameString(s: string, t: string): boolean {
  // Length is compared last, over the longer string, so the loop's time does not say where they differ.
  const n = Math.max(s.length, t.length)
  let diff = s.length ^ t.length
  for (let i = 0; i < n; i++) {
    diff |= (s.charCodeAt(i) | 0) ^ (t.charCodeAt(i) | 0)
  }
  return diff === 0
}

/** The index of `cred` in `keys`, or -1; compares against every key (constant-time per key). */
export function keyIndex(keys: readonly string[], cred: string): number {
  let found = -1
  let i = 0
  for (const key of keys) {
    if (sameString(key, cred) && found < 0) {
      found = i
    }
    i++
  }
  return found
}

/**
 * The credential of an `Authorization: Bearer <credential>` value (HTTP header or gRPC metadata):
 * `undefined` when the value is absent or blank, `null` when it is not a Bearer credential.
 * The one bearer parser of the gateway (REST, admin routes, gRPC).
 */
export function bearerToken(header: string | undefined): string | undefined | null {
  if (header === undefined || header.trim() === '') {
    return undefined
  }
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
  return m?.[1] ?? null
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
 * Checks `Authorization: Bearer <credential>` against API keys and a JWT setting; shared by the
 * HTTP middleware and the gRPC server so both accept and refuse the same credentials.
 * {@link Authenticator.of} answers undefined when neither keys nor a JWT secret are set (auth off).
 */
export class Authenticator {
  readonly #keys: string[]
  readonly #jwt: JwtAuthOptions | undefined
  readonly #expected: string

  private constructor(keys: string[], jwt: JwtAuthOptions | undefined) {
    this.#keys = keys
    this.#jwt = jwt
    this.#expected = jwt && keys.length > 0 ? 'an API key or a token' : jwt ? 'a token' : 'an API key'
  }

  static of(o: { apiKeys?: string[] | undefined; jwt?: JwtAuthOptions | undefined }): Authenticator | undefined {
    const keys = (o.apiKeys ?? []).filter((k) => k.length > 0)
    if (keys.length === 0 && !o.jwt) {
      return undefined
    }
    if (o.jwt && o.jwt.secret.length === 0) {
      throw new RangeError('jwt.secret must not be empty')
    }
    return new Authenticator(keys, o.jwt)
  }

  /**
   * The client id of a credential that is one of the API keys (`key:<index>`), without waiting;
   * `undefined` for anything else (no key matches, a token, no credential): {@link authenticate}
   * answers those. The listener's early judgement (early.ts) uses it.
   */
  keyClient(header: string | undefined): string | undefined {
    const cred = bearerToken(header)
    if (typeof cred !== 'string' || this.#keys.length === 0) {
      return undefined
    }
    const i = keyIndex(this.#keys, cred)
    return i >= 0 ? `key:${i}` : undefined
  }

  /**
   * The client id of a request (`key:<index>` for an API key, never the key itself; `jwt:<sub>`
   * for a token). Missing or malformed credentials, unknown key, invalid token: UNAUTHORIZED; a
   * valid token without the required scope: FORBIDDEN.
   */
  async authenticate(header: string | undefined): Promise<string> {
    const cred = bearerToken(header)
    if (cred === undefined) {
      throw unauthorized(`missing credentials: send Authorization: Bearer <${this.#expected}>`)
    }
    if (cred === null) {
      throw unauthorized(`malformed Authorization header: expected Bearer <${this.#expected}>`)
    }
    const keys = this.#keys
    const i = keys.length > 0 ? keyIndex(keys, cred) : -1
    if (i >= 0) {
      return `key:${i}`
    }
    const jwt = this.#jwt
    if (jwt && JWT_SHAPE.test(cred)) {
      return verifyJwt(jwt, cred)
    }
    throw unauthorized(jwt ? (keys.length > 0 ? 'unknown API key or malformed token' : 'malformed token') : 'unknown API key')
  }
}
