// Protocol v2 messages (docs/protocol.md#protocol-v2): packs built from already-encoded requests
// read back as the same requests; a malformed request inside a pack fails alone.
import { describe, expect, it } from 'vitest'
import { decodeInferMessage, decodeNotice, encodeNotice, encodePack, encodeRequest, encodeValue, packEncoded } from './codec.ts'
import { CohortError } from './errors.ts'
import type { InferRequest } from './envelope.ts'

const req = (i: number): InferRequest => ({ v: 1, id: `r${i}`, model: 'm', deadline: 1e12 + i, items: [{ x: i }] })

describe('protocol v2 packs', () => {
  it('packEncoded writes the same bytes as encoding the pack whole, for 1, 15, 16 and 256 requests', () => {
    for (const n of [1, 15, 16, 256]) {
      const reqs = Array.from({ length: n }, (_, i) => req(i))
      const a = packEncoded(reqs.map(encodeRequest))
      expect(Buffer.from(a).equals(Buffer.from(encodePack({ v: 2, reqs })))).toBe(true)
      const d = decodeInferMessage(a)
      expect(d.v).toBe(2)
      expect(d.v === 2 && d.reqs).toEqual(reqs)
    }
    expect(() => packEncoded([])).toThrow(RangeError)
  })

  it('reads a v1 request as v1 and refuses other versions and empty or oversized packs', () => {
    expect(decodeInferMessage(encodeRequest(req(1)))).toEqual({ v: 1, req: req(1) })
    expect(() => decodeInferMessage(encodeValue({ ...req(1), v: 3 }))).toThrow(/request.v must be 1, got 3/)
    expect(() => decodeInferMessage(encodeValue({ v: 2, reqs: [] }))).toThrow(CohortError)
    expect(() => decodeInferMessage(encodeValue({ v: 2, reqs: Array.from({ length: 257 }, (_, i) => req(i)) }))).toThrow(/1 to 256/)
  })

  it('a malformed request inside a pack comes back as its own error, with its id, and drops ack', () => {
    const d = decodeInferMessage(encodeValue({ v: 2, reqs: [{ ...req(1), ack: 'evil.subject' }, { v: 1, id: 'bad', model: 'm', deadline: 'soon', items: [] }, 7] }))
    if (d.v !== 2) throw new Error('expected a pack')
    expect(d.reqs[0]).toEqual(req(1))
    expect(d.reqs[1]).toMatchObject({ id: 'bad', error: { code: 'BAD_REQUEST' } })
    expect(d.reqs[2]).toMatchObject({ id: '', error: { code: 'BAD_REQUEST' } })
  })

  it('notices round-trip and are validated', () => {
    const acc = { v: 2 as const, t: 'accept' as const, worker: 'w', ids: ['a', 'b'], queued: 3 }
    expect(decodeNotice(encodeNotice(acc))).toEqual(acc)
    const rep = { v: 2 as const, t: 'replies' as const, replies: [{ v: 1 as const, id: 'a', items: [1] }] }
    expect(decodeNotice(encodeNotice(rep))).toEqual(rep)
    expect(() => decodeNotice(encodeValue({ v: 2, t: 'accept', ids: 'a' }))).toThrow(CohortError)
    expect(() => decodeNotice(encodeValue({ v: 2, t: 'replies', replies: [{ v: 1 }] }))).toThrow(/reply.id/)
    expect(() => decodeNotice(encodeValue({ v: 1, t: 'accept' }))).toThrow(/v: 2/)
  })
})
