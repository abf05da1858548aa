// More property tests of the msgpack envelope decoders (codec.test.ts has the first ones), with
// fixed seeds: the liveness notices (accept, heartbeat) too, hostile tensor shapes (NaN, negative,
// fractional, huge, overflowing products), every truncation of valid messages, and oversized
// declared sizes. Never a crash: a value, or a CohortError BAD_REQUEST (400).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  decodeAccept,
  decodeCancel,
  decodeHeartbeat,
  decodeReply,
  decodeRequest,
  decodeValue,
  encodeAccept,
  encodeHeartbeat,
  encodeReply,
  encodeRequest,
  encodeValue,
} from './codec.ts'
import { DATATYPES, DATATYPE_SIZE } from './datatypes.ts'
import { CohortError } from './errors.ts'
import { jsonToTensor } from './tensor-data.ts'

const SEED = 0xc0de_c
const decoders = { decodeRequest, decodeReply, decodeCancel, decodeValue, decodeAccept, decodeHeartbeat }

/** Run `fn`: it returns, or throws CohortError BAD_REQUEST; the error (if any) is returned. */
function onlyBadRequest(fn: () => unknown): CohortError | undefined {
  try {
    fn()
    return undefined
  } catch (e) {
    if (!(e instanceof CohortError)) {
      throw new Error(`not a CohortError: ${String(e)}`, { cause: e })
    }
    expect(e.code).toBe('BAD_REQUEST')
    expect(e.status).toBe(400)
    return e
  }
}

const hostileDim = fc.oneof(
  fc.constantFrom(Number.NaN, Infinity, -Infinity, -1, -0.5, 0.5, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e300),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
  fc.nat(3),
)

describe('envelope decoders under fuzzing (seeded)', () => {
  it('random bytes into every decoder, accept and heartbeat included', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 120 }), (bytes) => {
        for (const d of Object.values(decoders)) {
          onlyBadRequest(() => d(bytes))
        }
      }),
      { seed: SEED, numRuns: 1500 },
    )
  })

  it('notice-shaped values with wrong types', () => {
    const any = fc.anything({ maxDepth: 1, withBigInt: true })
    const notice = fc.record(
      {
        v: fc.oneof(fc.constant(1), any),
        id: fc.oneof(fc.string({ maxLength: 6 }), any),
        worker: fc.oneof(fc.string({ maxLength: 6 }), any),
        intervalMs: fc.oneof(fc.double(), fc.constantFrom(0, -1, Number.NaN, Infinity), any),
        bye: fc.oneof(fc.boolean(), any),
      },
      { requiredKeys: [] },
    )
    fc.assert(
      fc.property(notice, (n) => {
        let bytes: Uint8Array
        try {
          bytes = encodeValue(n)
        } catch {
          return // not encodable (a bigint beyond 64 bits): nothing to decode
        }
        const a = onlyBadRequest(() => decodeAccept(bytes))
        if (!a) {
          expect(typeof decodeAccept(bytes).worker).toBe('string')
        }
        const h = onlyBadRequest(() => decodeHeartbeat(bytes))
        if (!h) {
          const hb = decodeHeartbeat(bytes)
          expect(Number.isFinite(hb.intervalMs) && hb.intervalMs > 0).toBe(true)
        }
      }),
      { seed: SEED + 1, numRuns: 1500 },
    )
  })

  it('tensors with hostile shapes are refused; accepted tensors match their shape', () => {
    fc.assert(
      fc.property(fc.constantFrom(...DATATYPES), fc.array(hostileDim, { minLength: 0, maxLength: 4 }), fc.uint8Array({ maxLength: 48 }), (datatype, shape, bytes) => {
        const buf = encodeValue({ v: 1, id: 'f', model: 'm', deadline: 1, tensors: { t: { datatype, shape, bytes } } })
        const e = onlyBadRequest(() => decodeRequest(buf))
        if (!e) {
          const t = decodeRequest(buf).tensors?.['t']
          expect(t).toBeDefined()
          expect(t!.shape.every((d) => Number.isSafeInteger(d) && d >= 0)).toBe(true)
          if (datatype !== 'BYTES') {
            expect(t!.bytes.byteLength).toBe(t!.shape.reduce((a, b) => a * b, 1) * DATATYPE_SIZE[datatype])
          }
        }
      }),
      { seed: SEED + 2, numRuns: 3000 },
    )
  })

  it('every truncation of valid messages', () => {
    const x = jsonToTensor('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6])
    const s = jsonToTensor('s', 'BYTES', [2], ['a', 'bé'])
    const msgs: [Uint8Array, (b: Uint8Array) => unknown][] = [
      [encodeRequest({ v: 1, id: 'r', model: 'm', deadline: 5, tensors: { x, s } }), decodeRequest],
      [encodeRequest({ v: 1, id: 'r', model: 'm', deadline: 5, items: [{ a: 1 }, { b: 'x' }] }), decodeRequest],
      [encodeReply({ v: 1, id: 'r', errors: [null, { code: 'INVALID_INPUT', message: 'no' }], tensors: { x } }), decodeReply],
      [encodeAccept({ v: 1, id: 'r', worker: 'w1' }), decodeAccept],
      [encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 1000 }), decodeHeartbeat],
    ]
    for (const [full, decode] of msgs) {
      expect(() => decode(full)).not.toThrow()
      for (let n = 0; n < full.byteLength; n++) {
        onlyBadRequest(() => decode(full.subarray(0, n)))
      }
    }
  })

  it('declared sizes far beyond the message (msgpack str/bin/array/map headers)', () => {
    // 0xc6 bin32, 0xdb str32, 0xdd array32, 0xdf map32, each claiming 4 GiB - 1 with nothing after.
    for (const head of [0xc6, 0xdb, 0xdd, 0xdf]) {
      const b = new Uint8Array([0x81, 0xa1, 0x76, head, 0xff, 0xff, 0xff, 0xff, 0x00])
      for (const d of Object.values(decoders)) {
        onlyBadRequest(() => d(b))
      }
    }
  })
})
