// CORS through the whole app (`app.request`): preflights answered before authentication, error
// responses readable by the browser, unknown origins not allowed, off by default.
import { afterAll, describe, expect, it } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { createApp } from '../../app.ts'
import type { GatewayOptions } from '../../options.ts'

const transport = new InProcessTransport()
afterAll(() => transport.close())
const app = (o: Partial<GatewayOptions>) => createApp({ transport, ...o })
const ORIGIN = 'https://app.example.com'

function preflight(a: ReturnType<typeof app>, origin: string) {
  return a.request('/v2/models/demo/infer', {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  }) as Promise<Response>
}

describe('CORS', () => {
  it('answers a preflight from an allowed origin, before authentication', async () => {
    const a = app({ cors: { origins: [ORIGIN] }, apiKeys: ['k'] })
    const r = await preflight(a, ORIGIN)
    expect(r.status).toBe(204)
    expect(r.headers.get('access-control-allow-origin')).toBe(ORIGIN)
    expect(r.headers.get('access-control-allow-methods')).toContain('POST')
    expect(r.headers.get('access-control-allow-headers')).toContain('authorization')
    expect(r.headers.get('access-control-allow-headers')).toContain('content-type')
    expect(r.headers.get('access-control-max-age')).toBe('600')
    expect(r.headers.get('vary')).toContain('Origin')
  })

  it('does not allow an origin that is not listed', async () => {
    const r = await preflight(app({ cors: { origins: [ORIGIN] } }), 'https://evil.example.com')
    expect(r.headers.get('access-control-allow-origin')).toBeNull()
  })

  it('puts its headers on responses, errors included, and exposes Retry-After', async () => {
    const a = app({ cors: { origins: [ORIGIN], maxAgeS: 60 }, apiKeys: ['k'] })
    const denied = await a.request('/v2', { headers: { origin: ORIGIN } })
    expect(denied.status).toBe(401)
    expect(denied.headers.get('access-control-allow-origin')).toBe(ORIGIN)
    expect(denied.headers.get('access-control-expose-headers')).toContain('retry-after')
    const ok = await a.request('/v2', { headers: { origin: ORIGIN, authorization: 'Bearer k' } })
    expect(ok.status).toBe(200)
    expect(ok.headers.get('access-control-allow-origin')).toBe(ORIGIN)
    expect((await preflight(a, ORIGIN)).headers.get('access-control-max-age')).toBe('60')
  })

  it('allows any origin with "*"', async () => {
    const r = await app({ cors: { origins: ['*'] } }).request('/v2', { headers: { origin: 'https://x.example' } })
    expect(r.headers.get('access-control-allow-origin')).toBe('*')
    expect(() => app({ cors: { origins: ['*'], credentials: true } })).toThrow(RangeError)
  })

  it('is off by default', async () => {
    const a = app({})
    const r = await a.request('/v2', { headers: { origin: ORIGIN } })
    expect(r.status).toBe(200)
    expect(r.headers.get('access-control-allow-origin')).toBeNull()
    expect((await preflight(a, ORIGIN)).headers.get('access-control-allow-origin')).toBeNull()
  })
})
