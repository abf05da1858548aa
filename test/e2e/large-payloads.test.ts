// Messages past NATS's default 1 MiB max_payload travel transparently (chunked, core NATS only):
// a 640x640x3 FP32 image goes gateway -> NATS -> worker -> ONNX -> back, exactly; past the
// configured bound the gateway still answers 413. Also the Transport itself, as pipelines use it.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, headers, type NatsConnection } from '@nats-io/transport-node'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { CohortError } from '@cohort/protocol'
import { BLOB_ERROR_HEADER, BLOB_HEADER, createNatsTransport, type Transport } from '@cohort/transport'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, type JsonBody, ifStarted, allStarted } from '@cohort/test-support'

const H = 640
const W = 640
const C = 3
const IMAGE_BYTES = H * W * C * 4 // 4,915,200
const GATEWAY_BOUND = 8 * 1024 * 1024

/** FP32 image [batch, 640, 640, 3] -> its negation (so the worker provably ran the model). */
function negateModel(): Uint8Array {
  return model(
    graph({
      name: 'cohort_negate_image',
      inputs: [valueInfo('image', 'FP32', ['batch', H, W, C])],
      outputs: [valueInfo('negated', 'FP32', ['batch', H, W, C])],
      nodes: [node('Neg', ['image'], ['negated'])],
    }),
  )
}

function image(seed: number): Float32Array {
  const a = new Float32Array(H * W * C)
  let x = seed
  for (let i = 0; i < a.length; i++) {
    x = (x * 1664525 + 1013904223) >>> 0
    a[i] = (x / 2 ** 32) * 255 - 17.5
  }
  return a
}

/** POST an OIP binary request (JSON head + raw tensor bytes), asking for binary outputs. */
async function inferBinary(url: string, data: Float32Array, rows = 1): Promise<Response> {
  const head = new TextEncoder().encode(
    JSON.stringify({
      inputs: [{ name: 'image', datatype: 'FP32', shape: [rows, H, W, C], parameters: { binary_data_size: data.byteLength } }],
      parameters: { binary_data_output: true },
    }),
  )
  const body = new Uint8Array(head.byteLength + data.byteLength)
  body.set(head)
  body.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), head.byteLength)
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.byteLength) },
    body,
  })
}

async function binaryOutput(r: Response): Promise<{ head: JsonBody; tensor: Float32Array }> {
  const buf = new Uint8Array(await r.arrayBuffer())
  const n = Number(r.headers.get('inference-header-content-length'))
  const head = JSON.parse(new TextDecoder().decode(buf.subarray(0, n)))
  const rest = buf.slice(n)
  return { head, tensor: new Float32Array(rest.buffer, 0, rest.byteLength / 4) }
}

function expectNegated(got: Float32Array, sent: Float32Array): void {
  expect(got.length).toBe(sent.length)
  let mismatches = 0
  for (let i = 0; i < sent.length; i++) {
    if (got[i] !== -sent[i]!) {
      mismatches++
    }
  }
  expect(mismatches).toBe(0)
}

describe('large payloads over NATS with the default max_payload', () => {
  let nats: NatsServerHandle
  let nc: NatsConnection
  let worker: CliProcess | undefined
  let gw: CliProcess | undefined
  let base = ''

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false })
    nc = await connect({ servers: nats.url })
    const dir = mkdtempSync(join(tmpdir(), 'cohort-large-'))
    const path = join(dir, 'negate.onnx')
    writeFileSync(path, negateModel())
    worker = spawnCohort(['worker', '--nats', nats.url, '--threads', '1', '--model', `negate=${path}`])
    await worker.waitFor(/serving/, 60_000)
    gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--max-message-bytes', String(GATEWAY_BOUND)])
    const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
    base = `http://127.0.0.1:${port}`
  }, 120_000)

  afterAll(async () => {
    await Promise.all(allStarted(worker, gw).map((p) => p.stop('SIGKILL')))
    await ifStarted(nc)?.close()
    await ifStarted(nats)?.stop()
  })

  it('runs against a server whose max_payload is the 1 MiB default', () => {
    expect(nc.info?.max_payload).toBe(1024 * 1024)
    expect(IMAGE_BYTES).toBeGreaterThan(4 * 1024 * 1024)
  })

  it('round-trips a 640x640x3 FP32 image exactly, request and reply both past max_payload', async () => {
    const img = image(1)
    const r = await inferBinary(`${base}/v2/models/negate/infer`, img)
    expect(r.status, r.status === 200 ? '' : await r.clone().text()).toBe(200)
    const { head, tensor } = await binaryOutput(r)
    expect(head.outputs).toEqual([{ name: 'negated', datatype: 'FP32', shape: [1, H, W, C], parameters: { binary_data_size: IMAGE_BYTES } }])
    expectNegated(tensor, img)
  }, 60_000)

  it('keeps concurrent large requests apart (each gets its own image back)', async () => {
    const imgs = [image(2), image(3), image(4)]
    const rs = await Promise.all(imgs.map((img) => inferBinary(`${base}/v2/models/negate/infer`, img)))
    for (const [i, r] of rs.entries()) {
      expect(r.status).toBe(200)
      expectNegated((await binaryOutput(r)).tensor, imgs[i]!)
    }
  }, 90_000)

  it('still answers 413 past the configured bound (--max-message-bytes), and keeps serving', async () => {
    const rows = 2 // 9.8 MB > 8 MiB
    const r = await inferBinary(`${base}/v2/models/negate/infer`, new Float32Array(H * W * C * rows), rows)
    expect(r.status).toBe(413)
    expect(((await r.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE')
    const img = image(5)
    const ok = await inferBinary(`${base}/v2/models/negate/infer`, img)
    expect(ok.status).toBe(200)
    expectNegated((await binaryOutput(ok)).tensor, img)
  }, 60_000)
})

describe('the NATS Transport with messages past max_payload (stage-to-stage traffic)', () => {
  let nats: NatsServerHandle
  let a: Transport
  let b: Transport
  let bConn: NatsConnection
  let raw: NatsConnection
  /** Wait until the server has the subscriptions made so far (flush = a PING answered after the SUBs). */
  const subscribed = async () => {
    await bConn.flush()
    await raw.flush()
  }

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false })
    a = createNatsTransport(await connect({ servers: nats.url }), { ownsConnection: true })
    bConn = await connect({ servers: nats.url })
    b = createNatsTransport(bConn, { ownsConnection: true, maxMessageBytes: 4 * 1024 * 1024 })
    raw = await connect({ servers: nats.url })
  })

  afterAll(async () => {
    await ifStarted(a)?.close()
    await ifStarted(b)?.close()
    await ifStarted(raw)?.close()
    await ifStarted(nats)?.stop()
  })

  it('reports its bound as maxMessageBytes', () => {
    expect(a.maxMessageBytes).toBe(64 * 1024 * 1024)
    expect(b.maxMessageBytes).toBe(4 * 1024 * 1024)
  })

  it('carries a large request and a large reply exactly, while small messages keep flowing', async () => {
    const sub = b.subscribe('stage.reverse', { queue: 'q' })
    void (async () => {
      for await (const m of sub) {
        m.respond(m.data.slice().reverse())
      }
    })()
    await subscribed()
    const big = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 31) & 0xff)
    const [bigReply, smallReply] = await Promise.all([
      a.request('stage.reverse', big, { timeoutMs: 20_000 }),
      a.request('stage.reverse', new Uint8Array([1, 2, 3]), { timeoutMs: 20_000 }),
    ])
    expect(Buffer.from(bigReply).equals(Buffer.from(big.slice().reverse()))).toBe(true)
    expect(Array.from(smallReply)).toEqual([3, 2, 1])
    sub.unsubscribe()
  }, 60_000)

  it('carries a large publication to a subscriber', async () => {
    const sub = b.subscribe('stage.pub')
    const got = (async () => {
      for await (const m of sub) {
        return m.data
      }
      return undefined
    })()
    const big = new Uint8Array(2 * 1024 * 1024).map((_, i) => i % 251)
    await subscribed()
    a.publish('stage.pub', big)
    const data = await got
    expect(data && Buffer.from(data).equals(Buffer.from(big))).toBe(true)
    sub.unsubscribe()
  }, 30_000)

  it("answers PAYLOAD_TOO_LARGE when a message exceeds the receiver's own bound", async () => {
    const sub = b.subscribe('stage.small-bound')
    void (async () => {
      for await (const m of sub) {
        m.respond(new Uint8Array([9]))
      }
    })()
    await subscribed()
    const err = await a.request('stage.small-bound', new Uint8Array(5 * 1024 * 1024), { timeoutMs: 20_000 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CohortError)
    expect((err as CohortError).code).toBe('PAYLOAD_TOO_LARGE')
    sub.unsubscribe()
  }, 30_000)

  it('fails cleanly (BLOB_UNAVAILABLE, no hang) when a reply refers to chunks nobody serves', async () => {
    const sub = raw.subscribe('stage.bogus-reply')
    void (async () => {
      for await (const m of sub) {
        const h = headers()
        h.set(BLOB_HEADER, `v1 cohort.blob.nobody.b0 5000000 1000000 20000`)
        m.respond(new Uint8Array(0), { headers: h })
      }
    })()
    await subscribed()
    const err = await a.request('stage.bogus-reply', new Uint8Array([1]), { timeoutMs: 20_000 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CohortError)
    expect((err as CohortError).code).toBe('BLOB_UNAVAILABLE')
    sub.unsubscribe()
  }, 30_000)

  it('tells the sender (BLOB_UNAVAILABLE) when a request refers to chunks it cannot pull, and keeps serving', async () => {
    const sub = b.subscribe('stage.echo')
    void (async () => {
      for await (const m of sub) {
        m.respond(m.data)
      }
    })()
    await subscribed()
    const h = headers()
    h.set(BLOB_HEADER, `v1 cohort.blob.nobody.b1 3000000 1000000 20000`)
    const reply = await raw.request('stage.echo', new Uint8Array(0), { timeout: 20_000, headers: h })
    expect(reply.headers?.get(BLOB_ERROR_HEADER)).toMatch(/^BLOB_UNAVAILABLE /)
    const ok = await a.request('stage.echo', new Uint8Array([7]), { timeoutMs: 20_000 })
    expect(Array.from(ok)).toEqual([7])
    sub.unsubscribe()
  }, 30_000)

  it('refuses (BAD_REQUEST) a reference whose chunk subject is outside the blob prefix, and requests nothing there', async () => {
    const sub = b.subscribe('stage.echo2')
    void (async () => {
      for await (const m of sub) {
        m.respond(m.data)
      }
    })()
    // Anyone asking on the named subject would be seen here (no confused deputy: docs/security.md).
    const spy = raw.subscribe('stage.not-a-blob')
    const asked: string[] = []
    void (async () => {
      for await (const m of spy) {
        asked.push(m.subject)
      }
    })()
    await subscribed()
    const h = headers()
    h.set(BLOB_HEADER, `v1 stage.not-a-blob 3000000 1000000 20000`)
    const reply = await raw.request('stage.echo2', new Uint8Array(0), { timeout: 20_000, headers: h })
    expect(reply.headers?.get(BLOB_ERROR_HEADER)).toMatch(/^BAD_REQUEST .*is not a chunk subject/)
    await raw.flush()
    expect(asked).toEqual([])
    sub.unsubscribe()
    spy.unsubscribe()
  }, 30_000)
})

describe('large messages with the least-privilege users of infra/nats/auth.conf', () => {
  const AUTH_CONF = readFileSync(new URL('../../infra/nats/auth.conf', import.meta.url), 'utf8')
  let nats: NatsServerHandle
  let gateway: Transport
  let worker: Transport
  let workerConn: NatsConnection

  beforeAll(async () => {
    nats = await startNatsServer({
      extraConfig: `COHORT_NATS_GATEWAY_PASS: "gw-pass"\nCOHORT_NATS_WORKER_PASS: "wk-pass"\nCOHORT_NATS_ADMIN_PASS: "ad-pass"\n${AUTH_CONF}`,
    })
    gateway = createNatsTransport(await connect({ servers: nats.url, user: 'gateway', pass: 'gw-pass' }), { ownsConnection: true })
    workerConn = await connect({ servers: nats.url, user: 'worker', pass: 'wk-pass' })
    worker = createNatsTransport(workerConn, { ownsConnection: true })
  })

  afterAll(async () => {
    await ifStarted(gateway)?.close()
    await ifStarted(worker)?.close()
    await ifStarted(nats)?.stop()
  })

  it('carries a large request gateway -> worker and a large reply back (cohort.blob.> and allow_responses)', async () => {
    const sub = worker.subscribe('cohort.infer.big', { queue: 'cohort.q.big' })
    void (async () => {
      for await (const m of sub) {
        m.respond(m.data.slice().reverse())
      }
    })()
    await workerConn.flush()
    const big = new Uint8Array(2 * 1024 * 1024 + 5).map((_, i) => (i * 7) & 0xff)
    const reply = await gateway.request('cohort.infer.big', big, { timeoutMs: 20_000 })
    expect(Buffer.from(reply).equals(Buffer.from(big.slice().reverse()))).toBe(true)
    sub.unsubscribe()
  }, 30_000)
})
