// Property tests (fast-check, fixed seeds) of the gateway's request decoding: the OIP JSON decoder,
// Triton's binary tensor extension, and whole requests through createApp with a real in-process
// worker. Garbled, truncated, oversized, NaN, negative or huge shapes, wrong types: never a crash,
// always a 4xx CohortError (never a 500), and a good request next to bad ones gets its own answer.
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { CohortError, DATATYPES, DATATYPE_SIZE } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from './app.ts'
import { parseInferBody } from './oip.ts'

const SEED = 0x5eed_c0
const enc = new TextEncoder()

/** Run `fn`; it may return, or throw a CohortError with a 4xx status: anything else fails. */
function only4xx(fn: () => unknown): CohortError | undefined {
  try {
    fn()
    return undefined
  } catch (e) {
    if (!(e instanceof CohortError)) {
      throw new Error(`not a CohortError: ${String(e)}`, { cause: e })
    }
    expect(e.status, `${e.code}: ${e.message}`).toBeGreaterThanOrEqual(400)
    expect(e.status, `${e.code}: ${e.message}`).toBeLessThan(500)
    return e
  }
}

/** Dimensions a client might send: sane, zero, negative, fractional, huge, non-numbers. */
const dim = fc.oneof(
  { weight: 4, arbitrary: fc.nat(4) },
  fc.constantFrom(-1, -0, 0.5, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 1e300, Number.MAX_SAFE_INTEGER),
  fc.constantFrom('1', null, true, [], {}),
)
const dataValue = fc.oneof(fc.double(), fc.integer(), fc.boolean(), fc.string({ maxLength: 4 }), fc.constant(null), fc.constantFrom(2 ** 64, -(2 ** 63) - 1, 1e308))
const data = fc.oneof(fc.array(dataValue, { maxLength: 12 }), fc.array(fc.array(dataValue, { maxLength: 3 }), { maxLength: 4 }), fc.anything({ maxDepth: 2 }))
const input = fc.record(
  {
    name: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('a', 'b', 'x') }, fc.anything({ maxDepth: 1 })),
    datatype: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...DATATYPES) }, fc.string({ maxLength: 6 }), fc.anything({ maxDepth: 1 })),
    shape: fc.oneof({ weight: 4, arbitrary: fc.array(dim, { maxLength: 4 }) }, fc.anything({ maxDepth: 1 })),
    data,
    parameters: fc.oneof(fc.record({ binary_data_size: fc.oneof(fc.nat(64), dim) }, { requiredKeys: [] }), fc.anything({ maxDepth: 1 })),
  },
  { requiredKeys: ['name'] },
)
const oipDoc = fc.record(
  {
    id: fc.oneof(fc.string({ maxLength: 8 }), fc.anything({ maxDepth: 1 })),
    parameters: fc.oneof(fc.record({ binary_data_output: fc.boolean(), timeout: fc.oneof(fc.integer(), fc.double()) }), fc.anything({ maxDepth: 1 })),
    inputs: fc.oneof({ weight: 5, arbitrary: fc.array(input, { maxLength: 3 }) }, fc.anything({ maxDepth: 2 })),
    outputs: fc.oneof(fc.array(fc.record({ name: fc.string({ maxLength: 3 }) })), fc.anything({ maxDepth: 1 })),
  },
  { requiredKeys: [] },
)

/** JSON.stringify as it behaves at run time: undefined for a value JSON has no text for (undefined, a function). */
const stringify = (v: unknown): string | undefined => JSON.stringify(v)

/** JSON text with tokens JSON.stringify never writes: NaN, Infinity, 1e999, -0, huge integers. */
const rawJson = fc
  .tuple(oipDoc, fc.constantFrom('NaN', 'Infinity', '-Infinity', '1e999', '-0', '18446744073709551616', '1.5e-400'))
  .map(([doc, tok]) => JSON.stringify(doc).replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/i, tok))

describe('OIP JSON decoder (parseInferBody)', () => {
  it('random bytes, with and without Inference-Header-Content-Length', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.option(fc.oneof(fc.nat(400).map(String), fc.string({ maxLength: 5 }))), (bytes, hl) => {
        only4xx(() => parseInferBody(bytes, hl ?? undefined))
      }),
      { seed: SEED, numRuns: 800 },
    )
  })

  it('OIP-shaped documents with wrong types, bad shapes and data', () => {
    fc.assert(
      fc.property(oipDoc, (doc) => {
        const text = stringify(doc)
        if (text === undefined) {
          return
        }
        let parsed: ReturnType<typeof parseInferBody> | undefined
        only4xx(() => (parsed = parseInferBody(enc.encode(text), undefined)))
        if (parsed) {
          // Accepted: every tensor is consistent with its shape and dim 0 is the item count.
          expect(parsed.itemCount).toBeGreaterThan(0)
          for (const t of Object.values(parsed.tensors)) {
            expect(t.shape[0]).toBe(parsed.itemCount)
            const n = t.shape.reduce((a, b) => a * b, 1)
            if (t.datatype !== 'BYTES') {
              expect(t.bytes.byteLength).toBe(n * DATATYPE_SIZE[t.datatype])
            }
          }
        }
      }),
      { seed: SEED + 1, numRuns: 800 },
    )
  })

  it('NaN, Infinity, out-of-range and huge numbers in the JSON text', () => {
    fc.assert(
      fc.property(rawJson, (text) => {
        only4xx(() => parseInferBody(enc.encode(text), undefined))
      }),
      { seed: SEED + 2, numRuns: 500 },
    )
  })

  it('huge and negative shapes are refused before any allocation', () => {
    for (const shape of [[2 ** 53], [2 ** 31, 2 ** 31], [1e6, 1e6, 1e6], [-1, 4], [1, -0.5], [2 ** 53 + 2]]) {
      const body = enc.encode(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape, data: [1, 2, 3] }] }))
      const e = only4xx(() => parseInferBody(body, undefined))
      expect(e?.code, JSON.stringify(shape)).toBe('BAD_REQUEST')
    }
  })
})

/** A valid binary-extension request: the JSON header and the raw tensors after it. */
const binaryRequest = fc
  .array(fc.record({ datatype: fc.constantFrom('FP32', 'INT64', 'UINT8', 'FP16', 'BOOL'), rows: fc.integer({ min: 1, max: 3 }), cols: fc.integer({ min: 1, max: 4 }) }), {
    minLength: 1,
    maxLength: 3,
  })
  .chain((specs) => {
    const rows = specs[0]!.rows
    return fc.tuple(
      ...specs.map((s) =>
        fc.uint8Array({ minLength: rows * s.cols * DATATYPE_SIZE[s.datatype], maxLength: rows * s.cols * DATATYPE_SIZE[s.datatype] }).map((bytes) => ({ ...s, rows, bytes })),
      ),
    )
  })
  .map((tensors) => {
    const fixed = tensors.map((t) => (t.datatype === 'BOOL' ? { ...t, bytes: t.bytes.map((b) => b & 1) } : t))
    const head = enc.encode(
      JSON.stringify({
        inputs: fixed.map((t, i) => ({ name: `in${i}`, datatype: t.datatype, shape: [t.rows, t.cols], parameters: { binary_data_size: t.bytes.byteLength } })),
      }),
    )
    const body = new Uint8Array(head.byteLength + fixed.reduce((s, t) => s + t.bytes.byteLength, 0))
    body.set(head)
    let o = head.byteLength
    for (const t of fixed) {
      body.set(t.bytes, o)
      o += t.bytes.byteLength
    }
    return { body, headLength: head.byteLength, tensors: fixed }
  })

describe('binary tensor extension parser', () => {
  it('parses valid requests exactly', () => {
    fc.assert(
      fc.property(binaryRequest, ({ body, headLength, tensors }) => {
        const r = parseInferBody(body, String(headLength))
        tensors.forEach((t, i) => {
          expect(r.tensors[`in${i}`]?.bytes).toEqual(t.bytes)
          expect(r.tensors[`in${i}`]?.shape).toEqual([t.rows, t.cols])
        })
      }),
      { seed: SEED + 3, numRuns: 150 },
    )
  })

  it('truncated, padded, misdeclared or bit-flipped requests: a result or a 4xx, never a crash', () => {
    fc.assert(
      fc.property(
        binaryRequest,
        fc.integer({ min: -40, max: 40 }),
        fc.nat(),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
        fc.oneof(fc.constant(''), fc.constant('-1'), fc.constant('1e3'), fc.constant('abc'), fc.constant('9007199254740993')),
        ({ body, headLength }, delta, cut, flips, badHeader) => {
          const b = new Uint8Array(body.subarray(0, body.byteLength - (cut % (body.byteLength + 1))))
          for (const [i, v] of flips) {
            if (b.byteLength > 0) {
              b[i % b.byteLength] = v
            }
          }
          only4xx(() => parseInferBody(b, String(headLength + delta)))
          only4xx(() => parseInferBody(b, badHeader))
          only4xx(() => parseInferBody(b, undefined))
        },
      ),
      { seed: SEED + 4, numRuns: 500 },
    )
  })

  it('a truncated binary section is a 400 that names the input', () => {
    const body = enc.encode(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }] }))
    const full = new Uint8Array(body.byteLength + 8)
    full.set(body)
    const e = only4xx(() => parseInferBody(full, String(body.byteLength)))
    expect(e?.code).toBe('BAD_REQUEST')
    expect(e?.message).toMatch(/input "a"/)
  })
})

// Whole requests through the app and a real worker (in-process transport).
const double = definePredictor({
  name: 'double',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  predict: (xs) => xs.map((i) => (Number.isFinite(i.x) ? { y: i.x * 2 } : itemError('x must be finite'))),
})

describe('fuzzed requests through createApp and a worker', () => {
  let transport: InProcessTransport
  let worker: CohortWorker
  let app: Hono
  const unexpected: unknown[] = []

  beforeAll(async () => {
    transport = new InProcessTransport()
    worker = new CohortWorker({ transport, runners: [new PredictorRunner(double)], outputSchemas: { double: double.output } })
    await worker.start()
    app = createApp({ transport, maxBodyBytes: 4096, onUnexpectedError: (e) => unexpected.push(e) })
  })

  afterAll(async () => {
    await worker.drain()
    await transport.close()
    expect(unexpected).toEqual([])
  })

  const send = (path: string, body: Uint8Array | string, headers: Record<string, string> = {}) =>
    app.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: body as BodyInit }) as Promise<Response>

  const badBody = fc.oneof(
    fc.uint8Array({ maxLength: 200 }),
    oipDoc.map((d) => enc.encode(stringify(d) ?? '')),
    rawJson.map((t) => enc.encode(t)),
    fc.record({ input: fc.anything({ maxDepth: 2 }) }).map((d) => enc.encode(JSON.stringify(d))),
    fc.nat(3).map((n) => new Uint8Array(4097 + n * 1000).fill(0x20)), // over maxBodyBytes
  )
  const route = fc.constantFrom('/v2/models/double/infer', '/models/double/predictions', '/v2/models/double/versions/1/infer')

  it('answers every fuzzed request with a 2xx or 4xx JSON error, never a 500', async () => {
    await fc.assert(
      fc.asyncProperty(route, badBody, fc.option(fc.nat(300).map(String)), async (path, body, hl) => {
        const r = await send(path, body, hl ? { 'inference-header-content-length': hl } : {})
        expect(r.status, await r.clone().text()).toBeLessThan(500)
        if (r.status >= 400) {
          const j = (await r.json()) as { code?: unknown }
          expect(typeof j.code).toBe('string')
        } else {
          await r.arrayBuffer()
        }
      }),
      { seed: SEED + 5, numRuns: 200 },
    )
    expect(unexpected).toEqual([])
  })

  it('a good request among fuzzed bad ones gets its own answer', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(badBody, { minLength: 1, maxLength: 8 }), fc.integer({ min: -1000, max: 1000 }), async (bads, x) => {
        const good = send('/models/double/predictions', JSON.stringify({ input: { x } }))
        const others = bads.map((b) => send('/models/double/predictions', b))
        const [g, ...rest] = await Promise.all([good, ...others])
        expect(g.status).toBe(200)
        expect(((await g.json()) as { output: { y: number } }).output.y).toBe(2 * x)
        for (const r of rest) {
          expect(r.status).toBeLessThan(500)
          await r.arrayBuffer()
        }
      }),
      { seed: SEED + 6, numRuns: 30 },
    )
  })
})
