// The gateway core: options resolved once (validated, frozen), one gateway id shared by the HTTP
// app and the gRPC server made from it, and idempotent close() of the core and of the app.
import { describe, expect, it } from 'vitest'
import { Registry } from '@cohort/metrics'
import { subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { createApp } from './app.ts'
import { createGatewayCore } from './core.ts'
import { startGrpcServer } from './adapters/grpc/server.ts'

describe('createGatewayCore', () => {
  it('resolves the options once: defaults applied, frozen (nested objects too), bad values named', async () => {
    const transport = new InProcessTransport()
    const workerLoss = { missedHeartbeats: 5 }
    const core = createGatewayCore({ transport, workerLoss })
    expect(core.options.requestTimeoutMs).toBe(30_000)
    expect(Object.isFrozen(core.options)).toBe(true)
    expect(Object.isFrozen(core.options.workerLoss)).toBe(true)
    expect(Object.isFrozen(workerLoss)).toBe(false) // the caller's object is copied, not frozen
    expect(() => {
      ;(core.options as { requestTimeoutMs: number }).requestTimeoutMs = 1
    }).toThrow(TypeError)
    expect(() => createGatewayCore({ transport, metaTimeoutMs: 0 })).toThrow(/metaTimeoutMs must be > 0/)
    expect(() => createGatewayCore({ transport, maxBulkInputs: 0.5 })).toThrow(/maxBulkInputs must be an integer >= 1/)
    await core.close()
    await transport.close()
  })

  it('HTTP and gRPC made from one core are one gateway: one id, one heartbeat subscription', async () => {
    const transport = new InProcessTransport()
    const registry = new Registry()
    const subscribed: string[] = []
    const subscribe = transport.subscribe.bind(transport)
    transport.subscribe = (subject, o) => {
      subscribed.push(subject)
      return subscribe(subject, o)
    }
    const core = createGatewayCore({ transport, registry })
    const app = createApp(core)
    const grpc = await startGrpcServer({ core, port: 0 })
    const info = registry
      .render()
      .split('\n')
      .filter((l) => l.startsWith('cohort_gateway_info{'))
    expect(info).toEqual([`cohort_gateway_info{gateway="${core.gatewayId}"} 1`])
    expect(app.core).toBe(core)
    expect(subscribed.filter((x) => x === subjects().heartbeat())).toHaveLength(1)
    await grpc.close()
    await app.close()
    expect(core.liveness).toBeDefined()
    await core.close()
    await core.close() // idempotent
    await transport.close()
  })

  it('an app built from options owns its core: close() stops its liveness detector, twice is once', async () => {
    const transport = new InProcessTransport()
    const app = createApp({ transport })
    const lv = app.core.liveness!
    let closes = 0
    const close = lv.close.bind(lv)
    lv.close = () => {
      closes++
      close()
    }
    await Promise.all([app.close(), app.close()])
    await app.close()
    expect(closes).toBe(1)
    await transport.close()
  })
})
