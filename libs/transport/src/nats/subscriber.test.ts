// The subscriber's in-flight step alone (the whole subscriber on a real nats-server:
// test/e2e/transport/subscriber.test.ts).
import { describe, expect, it } from 'vitest'
import { InflightBudget } from '../inflight.ts'
import { admitInflight } from './subscriber.ts'

describe('admitInflight: the in-flight step of a bounded subscription', () => {
  it('takes one request and its bytes while both bounds have room', () => {
    const b = new InflightBudget({ maxRequests: 2, maxBytes: 100 })
    expect(admitInflight(b, 60)).toBeUndefined()
    expect([b.requests, b.bytes]).toEqual([1, 60])
  })

  it('refuses with 503 OVERLOADED (Retry-After 1) past either bound, taking nothing', () => {
    const b = new InflightBudget({ maxRequests: 1, maxBytes: 100 })
    expect(admitInflight(b, 10)).toBeUndefined()
    const e = admitInflight(b, 10)
    expect(e?.code).toBe('OVERLOADED')
    expect(e?.retryAfterS).toBe(1)
    expect(e?.message).toContain('1 requests and 10 bytes in flight')
    b.release(10)
    expect(admitInflight(b, 60)).toBeUndefined()
    expect(admitInflight(new InflightBudget({ maxRequests: 5, maxBytes: 100 }), 60)).toBeUndefined()
    const bytes = new InflightBudget({ maxRequests: 5, maxBytes: 100 })
    bytes.tryAdmit(60)
    expect(admitInflight(bytes, 60)?.code).toBe('OVERLOADED')
    expect([bytes.requests, bytes.bytes]).toEqual([1, 60])
  })

  it('refuses a message larger than the byte bound itself with 413 PAYLOAD_TOO_LARGE naming it (never servable here)', () => {
    const b = new InflightBudget({ maxRequests: 5, maxBytes: 100 })
    const e = admitInflight(b, 101)
    expect(e?.code).toBe('PAYLOAD_TOO_LARGE')
    expect(e?.message).toContain('in-flight bytes bound (inflight.maxBytes) of 100 bytes')
    expect([b.requests, b.bytes, b.refused]).toEqual([0, 0, 0])
  })
})
