// Authentication middleware through the whole app (`app.request`, no sockets): API keys, JWT,
// open health probes, /metrics, and admin routes that an API key never opens.
import { generateKeyPairSync } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sign } from 'hono/jwt'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '../../app.ts'
import type { GatewayOptions } from '../../options.ts'
import type { JsonBody } from '@cohort/test-support'

const adder = definePredictor({
  name: 'adder',
  input: Type.Object({ a: Type.Number(), b: Type.Number({ default: 0 }) }),
  output: Type.Object({ sum: Type.Number() }),
  predict: (xs) => xs.map((x) => ({ sum: x.a + x.b })),
})

let transport: InProcessTransport
let worker: CohortWorker

beforeAll(async () => {
  transport = new InProcessTransport()
  worker = new CohortWorker({ transport, runners: [new PredictorRunner(adder)] })
  await worker.start()
})

afterAll(async () => {
  await worker.drain()
  await transport.close()
})

function app(o: Partial<GatewayOptions>) {
  return createApp({ transport, metaTimeoutMs: 200, ...o })
}

async function call(
  a: ReturnType<typeof app>,
  path: string,
  o: { auth?: string; method?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; body: JsonBody }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (o.auth !== undefined) {
    headers['authorization'] = o.auth
  }
  const r = await a.request(path, {
    method: o.method ?? (o.body !== undefined ? 'POST' : 'GET'),
    headers,
    ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
  })
  const text = await r.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // text
  }
  return { status: r.status, headers: r.headers, body }
}

const SECRET = 'test-secret-0123456789abcdef'
const now = () => Math.floor(Date.now() / 1000)

describe('authentication off (the embedded default)', () => {
  it('serves every route without credentials', async () => {
    const a = app({})
    expect((await call(a, '/v2')).status).toBe(200)
    expect((await call(a, '/models/adder/predictions', { body: { input: { a: 1, b: 2 } } })).body.output).toEqual({ sum: 3 })
    expect((await call(a, '/metrics')).status).toBe(200)
  })
})

describe('API keys', () => {
  const a = () => app({ apiKeys: ['key-one', 'key-two'] })

  it('answers a request without credentials 401 UNAUTHORIZED with WWW-Authenticate: Bearer', async () => {
    const r = await call(a(), '/v2')
    expect(r.status).toBe(401)
    expect(r.body.code).toBe('UNAUTHORIZED')
    expect(r.body.error).toMatch(/missing credentials/)
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer\b/)
  })

  it('answers a garbled Authorization header 401', async () => {
    for (const auth of ['Basic a2V5LW9uZTo=', 'Bearer', 'Bearer key-one extra', 'key-one']) {
      const r = await call(a(), '/v2', { auth })
      expect(r.status, auth).toBe(401)
      expect(r.body.code).toBe('UNAUTHORIZED')
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer\b/)
    }
  })

  it('answers an unknown key 401 and does not echo it', async () => {
    const r = await call(a(), '/v2', { auth: 'Bearer key-three' })
    expect(r.status).toBe(401)
    expect(r.body).toEqual({ code: 'UNAUTHORIZED', error: 'unknown API key' })
    // A prefix or an extension of a key is not the key.
    expect((await call(a(), '/v2', { auth: 'Bearer key-on' })).status).toBe(401)
    expect((await call(a(), '/v2', { auth: 'Bearer key-one1' })).status).toBe(401)
  })

  it('lets a known key through to metadata and inference', async () => {
    expect((await call(a(), '/v2', { auth: 'Bearer key-one' })).status).toBe(200)
    expect((await call(a(), '/v2/models', { auth: 'bearer   key-two' })).status).toBe(200)
    const r = await call(a(), '/models/adder/predictions', { auth: 'Bearer key-two', body: { input: { a: 2, b: 3 } } })
    expect(r.status).toBe(200)
    expect(r.body.output).toEqual({ sum: 5 })
    const oip = await call(a(), '/v2/models/adder/infer', {
      auth: 'Bearer key-one',
      body: { inputs: [{ name: 'a', datatype: 'FP64', shape: [1], data: [4] }] },
    })
    expect(oip.status).toBe(200)
  })

  it('keeps the health probes open', async () => {
    expect((await call(a(), '/v2/health/live')).status).toBe(200)
    const ready = await call(a(), '/v2/health/ready')
    expect(ready.status).toBe(200)
    expect(ready.body.ready).toBe(true)
  })

  it('keeps /metrics behind authentication unless metricsOpen', async () => {
    expect((await call(a(), '/metrics')).status).toBe(401)
    expect((await call(a(), '/metrics', { auth: 'Bearer key-one' })).status).toBe(200)
    expect((await call(app({ apiKeys: ['key-one'], metricsOpen: true }), '/metrics')).status).toBe(200)
  })

  it('answers unknown routes 401 before 404: no route map for strangers', async () => {
    expect((await call(a(), '/nope')).status).toBe(401)
    expect((await call(a(), '/nope', { auth: 'Bearer key-one' })).status).toBe(404)
  })

  it('never opens admin routes with an API key; admin keys do not open inference', async () => {
    const b = app({ apiKeys: ['key-one'], adminKeys: ['admin-1'] })
    const byApiKey = await call(b, '/admin/models/adder/batching', { auth: 'Bearer key-one' })
    expect(byApiKey.status).toBe(403)
    expect(byApiKey.body.code).toBe('FORBIDDEN')
    const put = await call(b, '/admin/models/adder/batching', { auth: 'Bearer key-one', method: 'PUT', body: { maxBatchSize: 4 } })
    expect(put.status).toBe(403)
    expect((await call(b, '/admin/models/adder/batching')).status).toBe(401)
    expect((await call(b, '/admin/models/adder/batching', { auth: 'Bearer admin-1' })).status).toBe(200)
    // The admin key is not an API key.
    expect((await call(b, '/v2', { auth: 'Bearer admin-1' })).status).toBe(401)
  })

  it('closes admin routes when authentication is on and no admin key is set', async () => {
    const r = await call(a(), '/admin/models/adder/batching', { auth: 'Bearer key-one' })
    expect(r.status).toBe(403)
    expect(r.body.error).toMatch(/admin routes are closed/)
    expect((await call(a(), '/admin/models/adder/batching')).status).toBe(403)
  })
})

describe('JWT bearer tokens', () => {
  const jwt = { secret: SECRET, issuer: 'https://issuer.example', audience: 'cohort' }
  const a = () => app({ jwt })
  const claims = (over: Record<string, unknown> = {}) => ({
    sub: 'alice',
    iss: jwt.issuer,
    aud: 'cohort',
    iat: now() - 10,
    exp: now() + 300,
    ...over,
  })

  it('lets a valid token through', async () => {
    const token = await sign(claims(), SECRET, 'HS256')
    const r = await call(a(), '/models/adder/predictions', { auth: `Bearer ${token}`, body: { input: { a: 1 } } })
    expect(r.status).toBe(200)
    expect(r.body.output).toEqual({ sum: 1 })
  })

  it('answers an expired token 401 "token expired"', async () => {
    const token = await sign(claims({ iat: now() - 600, exp: now() - 60 }), SECRET, 'HS256')
    const r = await call(a(), '/v2', { auth: `Bearer ${token}` })
    expect(r.status).toBe(401)
    expect(r.body).toEqual({ code: 'UNAUTHORIZED', error: 'invalid token: token expired' })
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer\b/)
  })

  it('answers a token signed with another secret 401 "bad signature", without echoing the token', async () => {
    const token = await sign(claims(), 'another-secret-0123456789abcdef', 'HS256')
    const r = await call(a(), '/v2', { auth: `Bearer ${token}` })
    expect(r.status).toBe(401)
    expect(r.body.error).toBe('invalid token: bad signature')
    expect(JSON.stringify(r.body)).not.toContain(token.slice(0, 20))
  })

  it('checks issuer, audience and algorithm', async () => {
    const iss = await sign(claims({ iss: 'https://evil.example' }), SECRET, 'HS256')
    expect((await call(a(), '/v2', { auth: `Bearer ${iss}` })).body.error).toBe('invalid token: wrong issuer')
    const aud = await sign(claims({ aud: 'someone-else' }), SECRET, 'HS256')
    expect((await call(a(), '/v2', { auth: `Bearer ${aud}` })).body.error).toBe('invalid token: wrong audience')
    const hs512 = await sign(claims(), SECRET, 'HS512')
    expect((await call(a(), '/v2', { auth: `Bearer ${hs512}` })).status).toBe(401)
    // alg "none": an unsigned token never passes.
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')
    const none = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims())}.`
    expect((await call(a(), '/v2', { auth: `Bearer ${none}` })).status).toBe(401)
    expect((await call(a(), '/v2', { auth: 'Bearer not-a-token' })).status).toBe(401)
  })

  it('answers a valid token without the required scope 403 FORBIDDEN', async () => {
    const b = app({ jwt: { ...jwt, scope: 'infer' } })
    const without = await sign(claims({ scope: 'read' }), SECRET, 'HS256')
    const r = await call(b, '/v2', { auth: `Bearer ${without}` })
    expect(r.status).toBe(403)
    expect(r.body.code).toBe('FORBIDDEN')
    const withScope = await sign(claims({ scope: 'read infer' }), SECRET, 'HS256')
    expect((await call(b, '/v2', { auth: `Bearer ${withScope}` })).status).toBe(200)
    const scp = await sign(claims({ scp: ['infer'] }), SECRET, 'HS256')
    expect((await call(b, '/v2', { auth: `Bearer ${scp}` })).status).toBe(200)
  })

  it('accepts either an API key or a token when both are configured', async () => {
    const b = app({ jwt, apiKeys: ['key-one'] })
    const token = await sign(claims(), SECRET, 'HS256')
    expect((await call(b, '/v2', { auth: `Bearer ${token}` })).status).toBe(200)
    expect((await call(b, '/v2', { auth: 'Bearer key-one' })).status).toBe(200)
    expect((await call(b, '/v2', { auth: 'Bearer key-two' })).status).toBe(401)
  })

  it('verifies RS256 tokens with a PEM public key, and refuses an HS256 token keyed with it', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const pub = publicKey.export({ type: 'spki', format: 'pem' }) as string
    const b = app({ jwt: { secret: pub, alg: 'RS256' } })
    const rs = await sign(claims(), privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'RS256')
    expect((await call(b, '/v2', { auth: `Bearer ${rs}` })).status).toBe(200)
    // Algorithm confusion: the public key used as an HMAC secret.
    const hs = await sign(claims(), pub, 'HS256')
    const r = await call(b, '/v2', { auth: `Bearer ${hs}` })
    expect(r.status).toBe(401)
    expect(r.body.error).toBe('invalid token: wrong algorithm')
  })

  it('refuses an empty secret at startup', () => {
    expect(() => app({ jwt: { secret: '' } })).toThrow(/secret/)
  })
})
