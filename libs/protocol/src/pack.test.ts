// Protocol v2 messages (docs/protocol.md#protocol-v2): packs built from already-encoded requests
// read back as the same requests; a malformed request inside a pack fails alone.
import { describe, expect, it } from 'vitest'
import { decodeInferMessage, decodeNotice, encodeNotice, encodePack, encodeRequest, encodeValue, inferMessageFrom, msgpackSizeBound, noticeFrom, packEncoded } from './codec.ts'
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

  it('a pack or notice carried as a value (in-process) is checked as its decode is, into fresh envelopes that view the same bytes', () => {
    const bytes = new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer)
    const t = { v: 1 as const, id: 't', model: 'm', deadline: 1e12, ack: 'x', tensors: { in: { datatype: 'FP32' as const, shape: [2, 2], bytes } } }
    const pack = { v: 2, reqs: [t, { ...req(1), v: 3 }] }
    const m = inferMessageFrom(pack)
    // The same requests and errors as its decode (which gives Buffer views where this keeps Uint8Array).
    const norm = (v: unknown): unknown =>
      v instanceof Uint8Array ? [...v] : Array.isArray(v) ? v.map(norm) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)])) : v
    expect(norm(m)).toEqual(norm(decodeInferMessage(encodeValue(pack))))
    const first = m.v === 2 ? (m.reqs[0] as InferRequest) : undefined
    expect(first).not.toBe(t) // a fresh envelope: ack dropped there, the sender's left as it was
    expect(t.ack).toBe('x')
    expect(first?.tensors?.['in']?.bytes).toBe(bytes) // not copied
    expect(() => inferMessageFrom({ ...t, tensors: { in: { datatype: 'FP32', shape: [2, 2], bytes: bytes.subarray(1) } } })).toThrow(/needs 16 bytes/)
    const n = { v: 2 as const, t: 'replies' as const, replies: [{ v: 1 as const, id: 'a', tensors: { out: { datatype: 'FP32' as const, shape: [2, 2], bytes } } }] }
    expect(norm(noticeFrom(n))).toEqual(norm(decodeNotice(encodeNotice(n))))
    expect(() => noticeFrom({ v: 2, t: 'nope' })).toThrow(/notice.t/)
  })

  it('msgpackSizeBound is never below the encoded size', () => {
    const values: unknown[] = [
      { v: 2, t: 'replies', replies: [{ v: 1, id: 'é'.repeat(300), error: { code: 'X', message: '日本'.repeat(1000) } }] },
      { v: 2, reqs: Array.from({ length: 40 }, (_, i) => req(i)) },
      { a: [1.5, -1, 2 ** 40, null, true, undefined, new Float32Array(100), new Uint8Array(70_000)], b: new Date(0) },
    ]
    for (const v of values) {
      expect(msgpackSizeBound(v)).toBeGreaterThanOrEqual(encodeValue(v).byteLength)
    }
  })
})
