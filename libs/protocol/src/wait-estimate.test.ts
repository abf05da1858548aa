import { describe, expect, it } from 'vitest'
import { decodeHeartbeat, decodeNotice, encodeHeartbeat, encodeNotice, encodeValue } from './codec.ts'
import { MAX_WAIT_TENANTS } from './envelope.ts'

describe('queue-wait estimates on the wire (heartbeat models, v2 accept notices)', () => {
  it('a heartbeat carries a wait estimate per model; an old heartbeat without one still decodes', () => {
    const h = decodeHeartbeat(
      encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 1000, proto: 2, models: { m: { queued: 3, waitMs: 12.5, serviceMs: 4, itemMs: 0.25, tenants: { 'key:0': 40 } } } }),
    )
    expect(h.models).toEqual({ m: { queued: 3, waitMs: 12.5, serviceMs: 4, itemMs: 0.25, tenants: { 'key:0': 40 } } })
    expect(decodeHeartbeat(encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 1000 })).models).toBeUndefined()
  })

  it('malformed estimates are dropped, never fatal, and tenants are bounded', () => {
    const tenants = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`t${i}`, i]))
    const raw = encodeValue({ v: 1, id: 'w1', intervalMs: 1000, models: { bad: { queued: 'x', waitMs: 1, serviceMs: 1 }, ok: { queued: 1, waitMs: 1, serviceMs: 1, tenants } } })
    const h = decodeHeartbeat(raw)
    expect(Object.keys(h.models ?? {})).toEqual(['ok'])
    expect(Object.keys(h.models!.ok!.tenants!)).toHaveLength(MAX_WAIT_TENANTS)
  })

  it('an accept notice carries queued, waitMs, serviceMs, itemMs and tenant waits', () => {
    const n = decodeNotice(encodeNotice({ v: 2, t: 'accept', worker: 'w1', ids: ['a'], queued: 2, waitMs: 7, serviceMs: 3, itemMs: 0.5, tenants: { '': 9 } }))
    expect(n).toEqual({ v: 2, t: 'accept', worker: 'w1', ids: ['a'], queued: 2, waitMs: 7, serviceMs: 3, itemMs: 0.5, tenants: { '': 9 } })
    // itemMs is optional (older workers) and dropped when not a number.
    expect(decodeNotice(encodeValue({ v: 2, t: 'accept', worker: 'w1', ids: [], waitMs: 7, serviceMs: 3, itemMs: 'x' }))).toEqual({
      v: 2,
      t: 'accept',
      worker: 'w1',
      ids: [],
      waitMs: 7,
      serviceMs: 3,
    })
  })
})
