import { describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { createEdgeGateway } from './handler.ts'

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
