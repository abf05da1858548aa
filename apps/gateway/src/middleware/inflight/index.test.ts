// The gateway's in-flight bound (requests with bodies, and their bytes) through createApp over an
// InProcessTransport, with a hand-written worker that holds requests until told to answer.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeRequest, encodeReply, encodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { createApp } from '../../app.ts'
import type { GatewayOptions } from '../../options.ts'

const subj = subjects()
const META: ModelMeta = {
  name: 'hold',
  versions: ['1'],
  platform: 'cohort',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1] }],
  outputs: [{ name: 'x', datatype: 'FP32', shape: [-1] }],
  kind: 'predictor',
  ready: true,
  maxBatchSize: 8,
  maxDelayMs: 0,
}

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of closers.splice(0)) {
    await c()
  }
})

/** A worker for `hold` that answers each request only when `release()` is called. */
function setup(gw: Partial<GatewayOptions>) {
  const transport = new InProcessTransport()
  const held: (() => void)[] = []
  const infer = transport.subscribe(subj.infer('hold'), { queue: subj.queue('hold') })
  const meta = transport.subscribe(subj.meta('hold'), { queue: subj.queue('hold') })
  void (async () => {
    for await (const m of meta) m.respond(encodeValue(META))
  })()
  void (async () => {
    for await (const m of infer) {
      const req = decodeRequest(m.data)
      held.push(() => m.respond(encodeReply({ v: 1, id: req.id, tensors: req.tensors ?? {} })))
    }
  })()
  void transport.directory.announce('hold', encodeValue(META))
  const unexpected: unknown[] = []
  const app = createApp({ transport, metaTimeoutMs: 500, workerLoss: false, onUnexpectedError: (e) => unexpected.push(e), ...gw })
  closers.push(async () => {
    for (const r of held.splice(0)) r()
    infer.unsubscribe()
    meta.unsubscribe()
    await transport.close()
    expect(unexpected).toEqual([])
  })
  return { app, held, transport }
}

const body = (n: number) => JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [n], data: new Array(n).fill(1) }] })

/** A body stream that records whether anything read it. */
function watchedStream(text: string) {
  const state = { pulled: 0 }
  const bytes = new TextEncoder().encode(text)
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(c) {
        state.pulled++
        c.enqueue(bytes)
        c.close()
      },
    },
    { highWaterMark: 0 },
  )
  return { stream, state }
}

async function until(cond: () => boolean): Promise<void> {
  await expect.poll(cond, { timeout: 5_000, interval: 5 }).toBe(true)
}

describe('the gateway in-flight bound', () => {
  it('refuses a request past maxRequests with 503 OVERLOADED + Retry-After, without reading its body, and serves again once room is back', async () => {
    const { app, held } = setup({ inflight: { maxRequests: 2, maxBytes: 1 << 20 } })
    const infer = (init: RequestInit) => app.request('/v2/models/hold/infer', { method: 'POST', ...init }) as Promise<Response>
    const a = infer({ body: body(2) })
    const b = infer({ body: body(2) })
    await until(() => held.length === 2)
    const { stream, state } = watchedStream(body(2))
    const c = await infer({ body: stream, duplex: 'half', headers: { 'content-length': String(body(2).length) } } as RequestInit)
    expect(c.status).toBe(503)
    expect(c.headers.get('retry-after')).toBe('1')
    expect(await c.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringContaining('2 requests') })
    expect(state.pulled).toBe(0)
    // GETs (health, metadata) are not bounded.
    expect((await app.request('/v2/health/live')).status).toBe(200)
    for (const r of held.splice(0)) r()
    expect((await a).status).toBe(200)
    expect((await b).status).toBe(200)
    const d = infer({ body: body(2) })
    await until(() => held.length === 1)
    held.shift()!()
    expect((await d).status).toBe(200)
  })

  it('counts declared bytes at admission and refuses past maxBytes with 503 before reading', async () => {
    const { app, held } = setup({ inflight: { maxRequests: 100, maxBytes: 3600 } })
    const big = body(100) // ~ 270 bytes, counted 6 times (JSON)
    const first = app.request('/v2/models/hold/infer', { method: 'POST', body: big, headers: { 'content-length': String(big.length) } })
    const second = app.request('/v2/models/hold/infer', { method: 'POST', body: big, headers: { 'content-length': String(big.length) } })
    await until(() => held.length === 2)
    const { stream, state } = watchedStream(big)
    const third = await app.request('/v2/models/hold/infer', { method: 'POST', body: stream, duplex: 'half', headers: { 'content-length': String(big.length) } } as RequestInit)
    expect(third.status).toBe(503)
    expect(third.headers.get('retry-after')).toBe('1')
    expect(state.pulled).toBe(0)
    for (const r of held.splice(0)) r()
    expect((await first).status).toBe(200)
    expect((await second).status).toBe(200)
  })

  it('counts a body without Content-Length (chunked) while it is read, refusing it once past the bound', async () => {
    const { app, held } = setup({ inflight: { maxRequests: 100, maxBytes: 3600 } })
    const big = body(100)
    const first = app.request('/v2/models/hold/infer', { method: 'POST', body: big, headers: { 'content-length': String(big.length) } })
    await until(() => held.length === 1)
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        const bytes = new TextEncoder().encode(body(150))
        for (let i = 0; i < bytes.length; i += 64) c.enqueue(bytes.subarray(i, i + 64))
        c.close()
      },
    })
    const r = await app.request('/v2/models/hold/infer', { method: 'POST', body: chunks, duplex: 'half' } as RequestInit)
    expect(r.status).toBe(503)
    expect((await r.json()).code).toBe('OVERLOADED')
    held.shift()!()
    expect((await first).status).toBe(200)
    // All given back: the same chunked body now fits.
    const ok = app.request('/v2/models/hold/infer', { method: 'POST', body: body(150) })
    await until(() => held.length === 1)
    held.shift()!()
    expect((await ok).status).toBe(200)
  })

  it('answers 413 naming the bound for a declared body larger than the whole bytes bound (never servable)', async () => {
    const { app } = setup({ inflight: { maxBytes: 100 } })
    const big = body(100)
    const r = await app.request('/v2/models/hold/infer', { method: 'POST', body: big, headers: { 'content-length': String(big.length) } })
    expect(r.status).toBe(413)
    expect((await r.json()).error).toMatch(/in-flight bytes bound \(maxBytes\) of 100 bytes/)
  })

  it('answers 413, not 503, for an undeclared (chunked) body that alone passes the whole bytes bound', async () => {
    const { app } = setup({ inflight: { maxBytes: 100 } })
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        const bytes = new TextEncoder().encode(body(100))
        for (let i = 0; i < bytes.length; i += 32) c.enqueue(bytes.subarray(i, i + 32))
        c.close()
      },
    })
    const r = await app.request('/v2/models/hold/infer', { method: 'POST', body: chunks, duplex: 'half' } as RequestInit)
    expect(r.status).toBe(413)
    expect(r.headers.get('retry-after')).toBeNull()
    const j = (await r.json()) as { code: string; error: string }
    expect(j.code).toBe('PAYLOAD_TOO_LARGE')
    expect(j.error).toMatch(/in-flight bytes bound \(maxBytes\) of 100 bytes/)
  })

  it('counts a JSON body 6 times its length and a binary one once (parsing JSON holds several times the text)', async () => {
    const { app, held } = setup({ inflight: { maxBytes: 2000 } })
    const text = body(100) // ~ 270 bytes: 1620 counted as JSON
    const heavy = body(150) // ~ 400 bytes: 2400 counted as JSON, past the bound (1200 at the old weight 3: admitted)
    const json = await app.request('/v2/models/hold/infer', {
      method: 'POST',
      body: heavy,
      headers: { 'content-length': String(heavy.length), 'content-type': 'application/json' },
    })
    expect(json.status).toBe(413)
    expect((await json.json()).error).toMatch(/a JSON body counts 6 times its length/)
    // The same bytes declared binary are admitted (what the route makes of them is not the point).
    let settled = false
    const bin = Promise.resolve(
      app.request('/v2/models/hold/infer', { method: 'POST', body: heavy, headers: { 'content-length': String(heavy.length), 'content-type': 'application/octet-stream' } }),
    )
    void bin.then(() => (settled = true))
    await until(() => held.length > 0 || settled)
    held.shift()?.()
    expect((await bin).status).not.toBe(413)
    expect(text.length * 6).toBeLessThan(2000)
    expect(heavy.length * 3).toBeLessThan(2000)
  })

  it('keeps the connection of a small refused body (read and discarded), closes it for a large one', async () => {
    const { app, held } = setup({ inflight: { maxRequests: 1, maxBytes: 1 << 30 } })
    const first = app.request('/v2/models/hold/infer', { method: 'POST', body: body(2) })
    await until(() => held.length === 1)
    const small = await app.request('/v2/models/hold/infer', { method: 'POST', body: body(2), headers: { 'content-length': String(body(2).length) } })
    expect(small.status).toBe(503)
    expect(small.headers.get('connection')).toBeNull()
    const huge = body(2) + ' '.repeat(70 * 1024) // past the 64 KiB drained
    const big = await app.request('/v2/models/hold/infer', { method: 'POST', body: huge, headers: { 'content-length': String(huge.length) } })
    expect(big.status).toBe(503)
    expect(big.headers.get('connection')).toBe('close')
    held.shift()!()
    expect((await first).status).toBe(200)
  })

  it.each(['0x46', '70.0', '+70', '7e1', '-1', '70 70'])('refuses the Content-Length %j with 400 (strict decimal integers only)', async (len) => {
    const { app } = setup({})
    const r = await app.request('/v2/models/hold/infer', { method: 'POST', body: body(1), headers: { 'content-length': len } })
    expect(r.status).toBe(400)
    expect((await r.json()).error).toMatch(/Content-Length must be a decimal integer/)
  })
})
