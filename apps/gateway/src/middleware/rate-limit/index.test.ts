// Per-client token buckets: the bucket arithmetic with an injected clock, then the middleware
// through the whole app (`app.request`): 429 + Retry-After, recovery, one bucket per client.
import { afterAll, describe, expect, it, vi } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { createApp } from '../../app.ts'
import type { GatewayOptions } from '../../options.ts'
import { TokenBuckets } from './index.ts'

function clock(start = 1_000_000) {
  let t = start
  return { now: () => t, advance: (ms: number) => (t += ms) }
}

describe('TokenBuckets', () => {
  it('allows a burst, then one request per 1/rate seconds', () => {
    const c = clock()
    const b = new TokenBuckets({ requestsPerSecond: 2, burst: 3, now: c.now })
    expect([b.take('a'), b.take('a'), b.take('a')]).toEqual([0, 0, 0])
    expect(b.take('a')).toBeCloseTo(0.5)
    c.advance(250)
    expect(b.take('a')).toBeCloseTo(0.25)
    c.advance(250)
    expect(b.take('a')).toBe(0)
    expect(b.take('a')).toBeCloseTo(0.5)
  })

  it('keeps one bucket per client', () => {
    const c = clock()
    const b = new TokenBuckets({ requestsPerSecond: 1, burst: 1, now: c.now })
    expect(b.take('a')).toBe(0)
    expect(b.take('a')).toBeGreaterThan(0)
    expect(b.take('b')).toBe(0)
  })

  it('never refills beyond the burst, and survives a clock that steps back', () => {
    const c = clock()
    const b = new TokenBuckets({ requestsPerSecond: 10, burst: 2, now: c.now })
    c.advance(60_000)
    expect([b.take('a'), b.take('a')]).toEqual([0, 0])
    expect(b.take('a')).toBeGreaterThan(0)
    c.advance(-5_000)
    expect(b.take('a')).toBeGreaterThan(0)
  })

  it('forgets buckets that have refilled, and bounds the number of clients', () => {
    const c = clock()
    const b = new TokenBuckets({ requestsPerSecond: 1, burst: 2, maxClients: 100, now: c.now })
    for (let i = 0; i < 50; i++) {
      b.take(`c${i}`)
    }
    expect(b.size).toBe(50)
    c.advance(2_000) // burst / rate: every bucket is full again
    b.take('fresh')
    expect(b.size).toBe(1)
    for (let i = 0; i < 1_000; i++) {
      b.take(`d${i}`)
    }
    expect(b.size).toBe(100)
  })

  it('evicts the least recently seen client first', () => {
    const c = clock()
    const b = new TokenBuckets({ requestsPerSecond: 1, burst: 1, maxClients: 2, now: c.now })
    b.take('a')
    b.take('b')
    b.take('a') // a is now the most recent (and limited)
    b.take('c') // evicts b
    expect(b.take('a')).toBeGreaterThan(0) // a is still remembered
  })

  it('refuses nonsensical settings', () => {
    expect(() => new TokenBuckets({ requestsPerSecond: 0 })).toThrow(RangeError)
    expect(() => new TokenBuckets({ requestsPerSecond: 1, burst: 0.5 })).toThrow(RangeError)
    expect(() => new TokenBuckets({ requestsPerSecond: 1, maxClients: 0 })).toThrow(RangeError)
  })
})

describe('rate limit middleware', () => {
  const transport = new InProcessTransport()
  afterAll(() => transport.close())
  const app = (o: Partial<GatewayOptions>) => createApp({ transport, ...o })
  const get = (a: ReturnType<typeof app>, path: string, headers: Record<string, string> = {}) => a.request(path, { headers }) as Promise<Response>

  it('answers 429 RATE_LIMITED with Retry-After beyond the burst, and recovers after time passes', async () => {
    const c = clock()
    const a = app({ rateLimit: { requestsPerSecond: 1, burst: 2, now: c.now } })
    expect((await get(a, '/v2')).status).toBe(200)
    expect((await get(a, '/v2')).status).toBe(200)
    const limited = await get(a, '/v2')
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('1')
    expect(await limited.json()).toEqual({ code: 'RATE_LIMITED', error: 'rate limit of 1 requests/s (burst 2) exceeded' })
    c.advance(999)
    expect((await get(a, '/v2')).status).toBe(429)
    c.advance(1)
    expect((await get(a, '/v2')).status).toBe(200)
    expect((await get(a, '/v2')).status).toBe(429)
  })

  it('rounds Retry-After up to whole seconds', async () => {
    const c = clock()
    const a = app({ rateLimit: { requestsPerSecond: 0.4, burst: 1, now: c.now } })
    expect((await get(a, '/v2')).status).toBe(200)
    const r = await get(a, '/v2')
    expect(r.status).toBe(429)
    expect(r.headers.get('retry-after')).toBe('3') // 2.5 s
  })

  it('limits each API key on its own', async () => {
    const c = clock()
    const a = app({ apiKeys: ['k1', 'k2'], rateLimit: { requestsPerSecond: 1, burst: 1, now: c.now } })
    const k1 = { authorization: 'Bearer k1' }
    const k2 = { authorization: 'Bearer k2' }
    expect((await get(a, '/v2', k1)).status).toBe(200)
    expect((await get(a, '/v2', k1)).status).toBe(429)
    expect((await get(a, '/v2', k2)).status).toBe(200)
    // The same key from another address is the same client.
    expect((await get(a, '/v2', { ...k1, 'x-forwarded-for': '10.0.0.9' })).status).toBe(429)
    // Requests refused by authentication do not use a key's tokens.
    expect((await get(a, '/v2', { authorization: 'Bearer wrong' })).status).toBe(401)
  })

  it('without authentication, tells clients apart by x-forwarded-for', async () => {
    const c = clock()
    const a = app({ rateLimit: { requestsPerSecond: 1, burst: 1, now: c.now } })
    expect((await get(a, '/v2', { 'x-forwarded-for': '10.0.0.1, 192.168.0.1' })).status).toBe(200)
    expect((await get(a, '/v2', { 'x-forwarded-for': '10.0.0.1' })).status).toBe(429)
    expect((await get(a, '/v2', { 'x-forwarded-for': '10.0.0.2' })).status).toBe(200)
  })

  it('uses the adapter address when there is no x-forwarded-for', async () => {
    const c = clock()
    let addr = '127.0.0.1'
    const a = app({ rateLimit: { requestsPerSecond: 1, burst: 1, now: c.now }, adapter: { clientAddress: () => addr } })
    expect((await get(a, '/v2')).status).toBe(200)
    expect((await get(a, '/v2')).status).toBe(429)
    addr = '127.0.0.2'
    expect((await get(a, '/v2')).status).toBe(200)
  })

  it('never limits the health probes', async () => {
    const c = clock()
    const a = app({ rateLimit: { requestsPerSecond: 1, burst: 1, now: c.now } })
    for (let i = 0; i < 5; i++) {
      expect((await get(a, '/v2/health/live')).status).toBe(200)
    }
    expect((await get(a, '/v2')).status).toBe(200)
  })

  it('uses Date.now by default (fake timers)', async () => {
    vi.useFakeTimers({ now: 5_000_000 })
    try {
      const a = app({ rateLimit: { requestsPerSecond: 2, burst: 1 } })
      expect((await get(a, '/v2')).status).toBe(200)
      expect((await get(a, '/v2')).status).toBe(429)
      vi.setSystemTime(5_000_500)
      expect((await get(a, '/v2')).status).toBe(200)
    } finally {
      vi.useRealTimers()
    }
  })

  it('refuses a bad configuration at startup', () => {
    expect(() => app({ rateLimit: { requestsPerSecond: -1 } })).toThrow(RangeError)
  })
})
