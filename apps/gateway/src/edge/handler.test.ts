import { describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { closingAfterBody, createEdgeGateway } from './handler.ts'

const req = () => new Request('http://edge.test/v2/models/demo')

describe('createEdgeGateway', () => {
  it('answers 503 NO_WORKER when the connection fails, and tries again on the next request', async () => {
    let attempts = 0
    const gw = createEdgeGateway({
      connect: () => {
        attempts++
        return Promise.reject(new Error('connection refused'))
      },
    })
    const r = await gw.fetch(req())
    expect(r.status).toBe(503)
    expect(r.headers.get('retry-after')).toBe('1')
    expect(await r.json()).toEqual({ error: 'NATS is unreachable over websocket: connection refused', code: 'NO_WORKER' })
    expect((await gw.fetch(req())).status).toBe(503)
    expect(attempts).toBe(2)
  })

  it('answers 503 after connectTimeoutMs when the connection never opens (no hang)', async () => {
    for (const scope of ['shared', 'request'] as const) {
      const gw = createEdgeGateway({ scope, connectTimeoutMs: 50, connect: () => new Promise<NatsConnection>(() => undefined) })
      const r = await gw.fetch(req())
      expect(r.status).toBe(503)
      expect(((await r.json()) as { error: string }).error).toMatch(/within 50 ms/)
    }
  })

  it('answers 503 SHUTTING_DOWN after close(), which is idempotent', async () => {
    const gw = createEdgeGateway({ connect: () => Promise.reject(new Error('x')) })
    await gw.close()
    await gw.close()
    const r = await gw.fetch(req())
    expect(r.status).toBe(503)
    expect(((await r.json()) as { code: string }).code).toBe('SHUTTING_DOWN')
  })
})

describe('closingAfterBody (workerd: the connection lives as long as the response body)', () => {
  /** A body whose chunks the test pushes one at a time. */
  const source = () => {
    let ctrl!: ReadableStreamDefaultController<Uint8Array>
    const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctrl = c) })
    return { body, push: (s: string) => ctrl.enqueue(new TextEncoder().encode(s)), close: () => ctrl.close() }
  }

  it('passes each chunk on before the source has ended, and ends once when it does', async () => {
    const src = source()
    let ends = 0
    const res = closingAfterBody(new Response(src.body, { status: 201, headers: { 'content-type': 'text/event-stream' } }), () => ends++)
    expect(res.status).toBe(201)
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    const reader = res.body!.getReader()
    src.push('data: 1\n\n')
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 1\n\n')
    expect(ends).toBe(0)
    src.push('data: 2\n\n')
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 2\n\n')
    src.close()
    expect((await reader.read()).done).toBe(true)
    expect(ends).toBe(1)
  })

  it('ends when the client cancels mid-body, and cancels the source', async () => {
    let cancelled = false
    let ends = 0
    const body = new ReadableStream<Uint8Array>({ pull: (c) => c.enqueue(new Uint8Array([1])), cancel: () => void (cancelled = true) })
    const reader = closingAfterBody(new Response(body), () => ends++).body!.getReader()
    await reader.read()
    await reader.cancel('client gone')
    expect(cancelled).toBe(true)
    expect(ends).toBe(1)
  })

  it('ends at once for a response without a body', () => {
    let ends = 0
    const res = closingAfterBody(new Response(null, { status: 204 }), () => ends++)
    expect(res.status).toBe(204)
    expect(ends).toBe(1)
  })
})
