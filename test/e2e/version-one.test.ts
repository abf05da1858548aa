// Version "1" of a model served without versions, over a real nats-server: the gateway resolves
// its subject from the metadata it already holds, so a request is one send on the bus, not the
// three of the fallback (the version's main and overflow subjects, then the bare one). A model
// the gateway never saw still tries every subject before its answer.
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { serve } from '@hono/node-server'
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { createNatsTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { Type, definePredictor } from '@cohort/predictor'
import { startNatsServer, ifStarted, type NatsServerHandle } from '@cohort/test-support'

const adder = definePredictor({
  name: 'adder',
  input: Type.Object({ a: Type.Number() }),
  output: Type.Object({ sum: Type.Number() }),
  predict: (items) => items.map((i) => ({ sum: i.a + 1 })),
})

const body = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP64', shape: [1], data: [2] }] })

describe('version "1" over NATS: sends per request', () => {
  let nats: NatsServerHandle
  let spy: NatsConnection
  let worker: CohortWorker
  let app: ReturnType<typeof createApp>
  let server: Server
  let base = ''
  /** Messages seen on the request subjects (main and overflow of every target), by subject. */
  const sends = new Map<string, number>()
  const total = () => [...sends.values()].reduce((a, b) => a + b, 0)

  beforeAll(async () => {
    nats = await startNatsServer()
    spy = await connect({ servers: nats.url })
    const sub = spy.subscribe('>')
    void (async () => {
      for await (const m of sub) {
        if (/^cohort\.(infer|overflow)\./.test(m.subject)) {
          sends.set(m.subject, (sends.get(m.subject) ?? 0) + 1)
        }
      }
    })()
    await spy.flush()
    worker = new CohortWorker({
      transport: createNatsTransport(await connect({ servers: nats.url }), { ownsConnection: true }),
      registry: new Registry(),
      runners: [new PredictorRunner(adder)],
    })
    await worker.start()
    app = createApp({ transport: createNatsTransport(await connect({ servers: nats.url }), { ownsConnection: true }), registry: new Registry(), requestTimeoutMs: 30_000 })
    server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server))
    })
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

  afterAll(async () => {
    await ifStarted(worker)?.close()
    const srv = ifStarted(server)
    if (srv) {
      await new Promise<void>((r) => srv.close(() => r()))
    }
    await ifStarted(app)?.close()
    await ifStarted(spy)?.close()
    await ifStarted(nats)?.stop()
  })

  const post = (path: string) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })

  it('a model held as served without versions: one send per request on its bare subject', async () => {
    // The first request makes the gateway hold the model's metadata (as any request does).
    expect((await post('/v2/models/adder/versions/1/infer')).status).toBe(200)
    await spy.flush()
    sends.clear()
    const n = 10
    for (let i = 0; i < n; i++) {
      const r = await post('/v2/models/adder/versions/1/infer')
      expect(r.status).toBe(200)
      expect(await r.json()).toMatchObject({ model_version: '1', outputs: [{ name: 'sum', data: [3] }] })
    }
    await spy.flush()
    expect({ perRequest: total() / n, subjects: [...sends.keys()] }).toEqual({ perRequest: 1, subjects: ['cohort.infer.adder'] })
  })

  it('a model never seen is not shortcut: its version subject is tried (at most 4 sends) before its 503', async () => {
    await spy.flush()
    sends.clear()
    const r = await post('/v2/models/nobody/versions/1/infer')
    // Over packs (protocol v2) no worker's accept notice comes: 503 once the accept timeout ran out.
    expect(r.status).toBe(503)
    await spy.flush()
    expect({ versionSubjectTried: sends.has('cohort.infer.nobody.1'), atMost4: total() <= 4 }).toEqual({ versionSubjectTried: true, atMost4: true })
  })
})
