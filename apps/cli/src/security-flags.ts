import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'
import { DEFAULT_MAX_BODY_BYTES, type GatewayOptions, type JwtAuthOptions } from '@cohort/gateway'
import { knobGiven, knobHelp, knobOptions, type KnobTable } from './knobs.ts'
import { CliError } from './cli-error.ts'
import type { TlsFiles } from './http.ts'

type Values = Record<string, string | boolean | string[] | undefined>

const JWT_ALGS = ['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const
/** The JWT algorithm when --jwt-alg is not given. */
export const DEFAULT_JWT_ALG = 'HS256'
const mib = (n: number) => `${n / (1024 * 1024)} MiB`

/** Gateway security and limit knobs, shared by `serve` and `gateway` (see docs/security.md). */
export const SECURITY_KNOBS = Object.freeze({
  'api-key': {
    kind: 'list',
    arg: 'KEY',
    help: ['require Authorization: Bearer KEY on every route but /v2/health/*', '(repeatable; also COHORT_API_KEYS, comma-separated). Off when no key/JWT'],
  },
  'jwt-secret': { kind: 'string', arg: 'S', help: ['also accept JWT bearer tokens signed with S (also $COHORT_JWT_SECRET)'] },
  'jwt-key-file': { kind: 'string', arg: 'FILE', help: ['read the JWT secret, or the PEM public key for RS/PS/ES/EdDSA, from FILE'] },
  'jwt-alg': { kind: 'string', arg: 'ALG', choices: JWT_ALGS, default: DEFAULT_JWT_ALG, help: ['JWT algorithm'] },
  'jwt-issuer': { kind: 'string', arg: 'ISS', help: ['required "iss" claim'] },
  'jwt-audience': { kind: 'string', arg: 'AUD', help: ['required "aud" claim (comma-separated: any of them)'] },
  'jwt-scope': { kind: 'string', arg: 'SCOPE', help: ['required scope ("scope" or "scp" claim); a token without it gets 403'] },
  'metrics-open': { kind: 'bool', help: ['serve /metrics without credentials while authentication is on'] },
  'rate-limit': {
    kind: 'string',
    arg: 'RPS[:BURST]',
    help: ['per-client token bucket (per API key, token subject, else client address);', 'beyond it 429 with Retry-After. Off by default'],
  },
  'cors-origin': { kind: 'list', arg: 'ORIGIN', help: ['allow browser calls from ORIGIN (repeatable; * for any). Off by default'] },
  'max-body-bytes': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_MAX_BODY_BYTES,
    help: [`largest request body (default {default}, ${mib(DEFAULT_MAX_BODY_BYTES)}); beyond it 413`],
  },
  'tls-cert': { kind: 'string', arg: 'FILE', help: ['serve HTTPS with this certificate (PEM, with --tls-key)'] },
  'tls-key': { kind: 'string', arg: 'FILE', help: ['private key of --tls-cert (PEM)'] },
} as const satisfies KnobTable)

/** Gateway security and limit flags, shared by `serve` and `gateway`. */
export const SECURITY_OPTIONS = knobOptions(SECURITY_KNOBS)
/** Help text of {@link SECURITY_OPTIONS} (see docs/security.md). */
export const SECURITY_HELP = knobHelp(SECURITY_KNOBS)

function read(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (e) {
    throw new CliError(`cannot read --${flag} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e))}`)
  }
}

/** A list from a repeatable flag plus a comma-separated environment variable. */
function list(v: Values, flag: string, env?: string): string[] {
  const fromEnv = env
    ? (process.env[env] ?? '')
        .split(',')
        .map((k) => k.trim())
        .filter(Boolean)
    : []
  return [...((v[flag] as string[] | undefined) ?? []).map((k) => k.trim()).filter(Boolean), ...fromEnv]
}

function jwtOptions(v: Values): JwtAuthOptions | undefined {
  const fromFlag = typeof v['jwt-secret'] === 'string' ? v['jwt-secret'] : undefined
  const file = typeof v['jwt-key-file'] === 'string' ? v['jwt-key-file'] : undefined
  if (fromFlag !== undefined && file !== undefined) {
    throw new CliError('give --jwt-secret or --jwt-key-file, not both')
  }
  const secret = file !== undefined ? read('jwt-key-file', file).trim() : (fromFlag ?? process.env['COHORT_JWT_SECRET'])
  const rest = ['jwt-alg', 'jwt-issuer', 'jwt-audience', 'jwt-scope'].filter((f) => v[f] !== undefined)
  if (!secret) {
    if (rest.length > 0) {
      throw new CliError(`--${rest[0]} needs --jwt-secret, --jwt-key-file or COHORT_JWT_SECRET`)
    }
    return undefined
  }
  const alg = (v['jwt-alg'] as string | undefined) ?? DEFAULT_JWT_ALG
  if (!(JWT_ALGS as readonly string[]).includes(alg)) {
    throw new CliError(`--jwt-alg must be one of ${JWT_ALGS.join(', ')}, got "${alg}"`)
  }
  if (alg.startsWith('HS') && secret.length < 16) {
    throw new CliError('the JWT secret must be at least 16 characters')
  }
  const out: JwtAuthOptions = { secret, alg: alg as JwtAuthOptions['alg'] & string }
  if (typeof v['jwt-issuer'] === 'string') {
    out.issuer = v['jwt-issuer']
  }
  if (typeof v['jwt-audience'] === 'string') {
    const aud = v['jwt-audience']
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean)
    const [only] = aud
    out.audience = aud.length === 1 && only !== undefined ? only : aud
  }
  if (typeof v['jwt-scope'] === 'string') {
    out.scope = v['jwt-scope']
  }
  return out
}

/** `RPS[:BURST]`. */
export function parseRateLimit(s: string): { requestsPerSecond: number; burst?: number } {
  const m = /^([0-9]*\.?[0-9]+)(?::([0-9]+))?$/.exec(s.trim())
  const rps = m ? Number(m[1]) : NaN
  const burst = m?.[2] !== undefined ? Number(m[2]) : undefined
  if (!m || !(rps > 0) || (burst !== undefined && burst < 1)) {
    throw new CliError(`--rate-limit must be RPS[:BURST] with RPS > 0 and BURST >= 1, e.g. 10 or 10:20, got "${s}"`)
  }
  return burst !== undefined ? { requestsPerSecond: rps, burst } : { requestsPerSecond: rps }
}

/** Gateway options from the security flags (authentication, rate limit, CORS, body limit). */
export function securityOptions(v: Values): Partial<GatewayOptions> {
  const out: Partial<GatewayOptions> = {}
  const keys = list(v, 'api-key', 'COHORT_API_KEYS')
  if (keys.length > 0) {
    out.apiKeys = keys
  }
  const jwt = jwtOptions(v)
  if (jwt) {
    out.jwt = jwt
  }
  if (v['metrics-open'] === true) {
    out.metricsOpen = true
  }
  if (typeof v['rate-limit'] === 'string') {
    out.rateLimit = parseRateLimit(v['rate-limit'])
  }
  const origins = list(v, 'cors-origin')
  if (origins.length > 0) {
    out.cors = { origins }
  }
  const maxBody = knobGiven(SECURITY_KNOBS, { 'max-body-bytes': v['max-body-bytes'] }, {})['max-body-bytes']
  if (maxBody !== undefined) {
    out.maxBodyBytes = maxBody
  }
  return out
}

/** The HTTPS certificate and key from --tls-cert/--tls-key, or undefined for plain HTTP. */
export function tlsFiles(v: Values): TlsFiles | undefined {
  const cert = v['tls-cert'] as string | undefined
  const key = v['tls-key'] as string | undefined
  if ((cert === undefined) !== (key === undefined)) {
    throw new CliError('--tls-cert and --tls-key go together')
  }
  if (cert === undefined || key === undefined) {
    return undefined
  }
  const files = { cert: read('tls-cert', cert), key: read('tls-key', key) }
  try {
    createSecureContext(files) // fails here, before anything starts, on bad PEM or a key that does not match
  } catch (e) {
    throw new CliError(`--tls-cert ${cert} / --tls-key ${key}: ${e instanceof Error ? e.message : String(e)}`)
  }
  return files
}

/** One line describing what is on (no secrets), for the startup log. */
export function describeSecurity(o: Partial<GatewayOptions>, tls: boolean): string {
  const auth = [...(o.apiKeys?.length ? [`${o.apiKeys.length} API key${o.apiKeys.length > 1 ? 's' : ''}`] : []), ...(o.jwt ? [`JWT ${o.jwt.alg ?? DEFAULT_JWT_ALG}`] : [])]
  return [
    `auth ${auth.length ? auth.join(' + ') : 'off'}`,
    `rate limit ${o.rateLimit ? `${o.rateLimit.requestsPerSecond}/s` : 'off'}`,
    `cors ${o.cors ? o.cors.origins.join(' ') : 'off'}`,
    tls ? 'https' : 'http',
  ].join(', ')
}
