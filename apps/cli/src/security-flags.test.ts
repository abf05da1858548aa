// The security flags of `serve`/`gateway` and the NATS authentication flags, parsed to options.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CliError } from './cli-error.ts'
import { DEFAULT_SUBJECT_PREFIX } from '@cohort/protocol'
import { DEFAULT_KV_REPLICAS, MAX_KV_REPLICAS, NATS_AUTH_HELP, NATS_AUTH_OPTIONS, kvReplicas, natsAuthOptions } from './nats-auth.ts'
import { PREFIX_HELP } from './prefix-flags.ts'
import { DEFAULT_PROCESSES, PROCESSES_HELP, PROCESSES_OPTIONS, processesFlag } from './cluster.ts'
import { GRPC_OPTIONS } from './grpc-flags.ts'
import { DEFAULT_MAX_BODY_BYTES } from '@cohort/gateway'
import { parse } from './args.ts'
import { DEFAULT_JWT_ALG, SECURITY_HELP, SECURITY_OPTIONS, describeSecurity, parseRateLimit, securityOptions, tlsFiles } from './security-flags.ts'

const ENV = ['COHORT_API_KEYS', 'COHORT_JWT_SECRET', 'COHORT_NATS_USER', 'COHORT_NATS_PASS', 'COHORT_NATS_TOKEN'] as const
const saved = Object.fromEntries(ENV.map((k) => [k, process.env[k]]))
afterEach(() => {
  for (const k of ENV) {
    if (saved[k] === undefined) {
      Reflect.deleteProperty(process.env, k) // unset (an assignment would store the string 'undefined')
    } else {
      process.env[k] = saved[k]
    }
  }
})
for (const k of ENV) {
  Reflect.deleteProperty(process.env, k)
}

describe('security flags', () => {
  it('parses --rate-limit RPS[:BURST]', () => {
    expect(parseRateLimit('10')).toEqual({ requestsPerSecond: 10 })
    expect(parseRateLimit('0.5:3')).toEqual({ requestsPerSecond: 0.5, burst: 3 })
    for (const bad of ['', '0', '-1', '10:0', 'ten', '10:', '1:2:3']) {
      expect(() => parseRateLimit(bad), bad).toThrow(CliError)
    }
  })

  it('is empty without flags: the embedded default stays open', () => {
    expect(securityOptions({})).toEqual({})
    expect(describeSecurity({}, false)).toBe('auth off, rate limit off, cors off, http')
  })

  it('merges --api-key with COHORT_API_KEYS and reads the other flags', () => {
    process.env['COHORT_API_KEYS'] = ' env-1 , ,env-2'
    const o = securityOptions({
      'api-key': ['flag-1'],
      'rate-limit': '5:10',
      'cors-origin': ['https://a.example'],
      'max-body-bytes': '1024',
      'metrics-open': true,
    })
    expect(o).toEqual({
      apiKeys: ['flag-1', 'env-1', 'env-2'],
      rateLimit: { requestsPerSecond: 5, burst: 10 },
      cors: { origins: ['https://a.example'] },
      maxBodyBytes: 1024,
      metricsOpen: true,
    })
    expect(describeSecurity(o, true)).toBe('auth 3 API keys, rate limit 5/s, cors https://a.example, https')
    expect(() => securityOptions({ 'max-body-bytes': '0' })).toThrow(/--max-body-bytes/)
  })

  it('reads the JWT secret from the flag, the environment or a file, and checks it', () => {
    process.env['COHORT_JWT_SECRET'] = 'env-secret-0123456789'
    expect(securityOptions({ 'jwt-issuer': 'iss', 'jwt-audience': 'a,b', 'jwt-scope': 'infer' }).jwt).toEqual({
      secret: 'env-secret-0123456789',
      alg: 'HS256',
      issuer: 'iss',
      audience: ['a', 'b'],
      scope: 'infer',
    })
    expect(securityOptions({ 'jwt-secret': 'flag-secret-0123456789', 'jwt-audience': 'a' }).jwt?.audience).toBe('a')
    const dir = mkdtempSync(join(tmpdir(), 'cohort-jwt-'))
    writeFileSync(join(dir, 'secret'), 'file-secret-0123456789\n')
    expect(securityOptions({ 'jwt-key-file': join(dir, 'secret') }).jwt?.secret).toBe('file-secret-0123456789')
    expect(() => securityOptions({ 'jwt-secret': 'short' })).toThrow(/at least 16/)
    expect(() => securityOptions({ 'jwt-secret': 'flag-secret-0123456789', 'jwt-alg': 'none' })).toThrow(/--jwt-alg/)
    expect(() => securityOptions({ 'jwt-key-file': join(dir, 'missing') })).toThrow(/cannot read --jwt-key-file .*ENOENT/)
    delete process.env['COHORT_JWT_SECRET']
    expect(() => securityOptions({ 'jwt-issuer': 'iss' })).toThrow(/--jwt-issuer needs --jwt-secret/)
  })

  it('needs both --tls-cert and --tls-key', () => {
    expect(tlsFiles({})).toBeUndefined()
    expect(() => tlsFiles({ 'tls-cert': '/nope.pem' })).toThrow('--tls-cert and --tls-key go together')
    expect(() => tlsFiles({ 'tls-cert': '/nope.pem', 'tls-key': '/nope.key' })).toThrow(/cannot read --tls-cert \/nope\.pem: ENOENT/)
  })
})

describe('NATS authentication flags', () => {
  it('passes user/password, token or a creds file, one at a time', () => {
    expect(natsAuthOptions({})).toEqual({})
    expect(natsAuthOptions({ 'nats-user': 'worker', 'nats-pass': 'p' })).toEqual({ user: 'worker', pass: 'p' })
    process.env['COHORT_NATS_PASS'] = 'from-env'
    expect(natsAuthOptions({ 'nats-user': 'worker' })).toEqual({ user: 'worker', pass: 'from-env' })
    delete process.env['COHORT_NATS_PASS']
    expect(natsAuthOptions({ 'nats-token': 't' })).toEqual({ token: 't' })
    expect(() => natsAuthOptions({ 'nats-user': 'worker' })).toThrow('--nats-user and --nats-pass go together')
    expect(() => natsAuthOptions({ 'nats-token': 't', 'nats-user': 'u', 'nats-pass': 'p' })).toThrow(/give one NATS authentication/)
    expect(() => natsAuthOptions({ 'nats-creds': '/nope.creds' })).toThrow(/cannot read --nats-creds \/nope\.creds: ENOENT/)
  })

  it('builds a TLS config from --nats-tls-ca/--nats-tls-cert/--nats-tls-key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cohort-nats-tls-'))
    for (const f of ['ca.pem', 'cert.pem', 'key.pem']) {
      writeFileSync(join(dir, f), `-----${f}-----\n`)
    }
    expect(natsAuthOptions({ 'nats-tls-ca': join(dir, 'ca.pem') })).toEqual({ tls: { ca: '-----ca.pem-----\n' } })
    expect(natsAuthOptions({ 'nats-tls-ca': join(dir, 'ca.pem'), 'nats-tls-cert': join(dir, 'cert.pem'), 'nats-tls-key': join(dir, 'key.pem') })).toEqual({
      tls: { ca: '-----ca.pem-----\n', cert: '-----cert.pem-----\n', key: '-----key.pem-----\n' },
    })
    expect(() => natsAuthOptions({ 'nats-tls-cert': join(dir, 'cert.pem') })).toThrow('--nats-tls-cert and --nats-tls-key go together')
  })
})

describe('the security knob table', () => {
  it('options and help come from it; the body limit default is the gateway constant', () => {
    expect(SECURITY_HELP).toContain(`(default ${DEFAULT_MAX_BODY_BYTES}, 64 MiB)`)
    expect(SECURITY_HELP).toContain(`(default ${DEFAULT_JWT_ALG})`)
    expect(SECURITY_OPTIONS['api-key']).toEqual({ type: 'string', multiple: true })
    expect(() => securityOptions(parse(['--max-body-bytes', '0'], SECURITY_OPTIONS).values)).toThrow(/--max-body-bytes must be an integer >= 1/)
    expect(() => parse(['--api-keys', 'k'], SECURITY_OPTIONS)).toThrow(/unknown option --api-keys/)
  })
})

describe('the NATS auth, prefix, gRPC and processes knob tables', () => {
  it('help defaults are the constants; bounds name the flag', () => {
    expect(NATS_AUTH_HELP).toContain(`(default $COHORT_KV_REPLICAS or ${DEFAULT_KV_REPLICAS};`)
    expect(NATS_AUTH_HELP).toContain('NATS user (also $COHORT_NATS_USER)')
    expect(PREFIX_HELP).toContain(`(default ${DEFAULT_SUBJECT_PREFIX})`)
    expect(PROCESSES_HELP).toContain(`default ${DEFAULT_PROCESSES})`)
    expect(kvReplicas({})).toBe(DEFAULT_KV_REPLICAS)
    expect(() => kvReplicas(parse(['--kv-replicas', String(MAX_KV_REPLICAS + 1)], NATS_AUTH_OPTIONS).values)).toThrow(/--kv-replicas must be at most 5/)
    expect(() => processesFlag(parse(['--processes', '0'], PROCESSES_OPTIONS).values)).toThrow(/--processes must be an integer >= 1/)
    expect(() => parse(['--grpc', '1'], GRPC_OPTIONS)).toThrow(/unknown option --grpc /)
  })
})
