// What a finished request leaves for V8's young-generation GC on the path `cohort serve` runs (its
// Node listener and adapter, the embedded worker), against a bare node:http server: bytes that
// survive a scavenge, counted, not timed. A request's objects should all die young. Three things
// kept them alive into the old generation, where only a full GC frees them (4-5 ms scavenges on a
// 70-100 MB heap, the peers bench's low-load tail; docs/bench/gc-2026-12-03.md): per-request
// WeakMap entries (the scavenger treats a WeakMap's values as strong), `Map.clear()` on a hot map
// (V8 links the cleared table to its replacement, so one table in the old generation keeps every
// later one alive) and an arrival object built by spreads (2.3 KB per request). Its own file: the
// budgets' async_hooks (serve-budget.test.ts) would change what survives.
import { request, Agent } from 'node:http'
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp, type GatewayApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, OnnxRunner } from '@cohort/worker'
import { identityModelFile, startFloorServer } from '@cohort/test-support'
import { listen, type HttpServer } from './http.ts'
import { gatewayAdapter } from './node-adapter.ts'

const FEATURES = 64
const BODY = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, FEATURES], data: Array.from({ length: FEATURES }, (_, i) => i / 8) }] })
const agent = new Agent({ keepAlive: true, maxSockets: 1 })

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as (o: { type: 'major' | 'minor'; execution: 'sync' }) => void

function post(port: number, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))))
    })
    req.on('error', reject)
    req.end(BODY)
  })
}

function spaceUsed(name: string): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === name)?.space_used_size ?? 0
}

/**
 * Bytes per request that outlive it through a scavenge: `rounds` of `per` requests one at a time
 * (each answered before the next), a scavenge after each round; what is left in the new space after
 * it, plus the old space's growth (promotions), over the requests.
 */
async function survivingBytesPerRequest(send: () => Promise<unknown>, rounds = 6, per = 50): Promise<number> {
  for (let i = 0; i < 20; i++) {
    await send()
  }
  gc({ type: 'major', execution: 'sync' })
  gc({ type: 'minor', execution: 'sync' })
  const old0 = spaceUsed('old_space') + spaceUsed('large_object_space')
  let survived = 0
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < per; i++) {
      await send()
    }
    gc({ type: 'minor', execution: 'sync' })
    survived += spaceUsed('new_space')
  }
  const promoted = Math.max(0, spaceUsed('old_space') + spaceUsed('large_object_space') - old0)
  return (survived + promoted) / (rounds * per)
}

let worker: CohortWorker
let transport: InProcessTransport
let app: GatewayApp
let srv: HttpServer
let floorServer: Awaited<ReturnType<typeof startFloorServer>>

beforeAll(async () => {
  const path = identityModelFile(FEATURES, 'cohort-serve-gc-')
  transport = new InProcessTransport()
  const registry = new Registry()
  worker = new CohortWorker({ transport, registry, runners: [new OnnxRunner({ name: 'tensor', path, intraOpNumThreads: 1, inlineRunMs: 5 })] })
  await worker.start()
  app = createApp({ transport, registry, requestTimeoutMs: 30_000, adapter: gatewayAdapter(true) })
  srv = await listen(app, '127.0.0.1', 0)
  const beat = transport.subscribe('cohort.heartbeat')
  await beat[Symbol.asyncIterator]().next()
  beat.unsubscribe()
  floorServer = await startFloorServer()
})

afterAll(async () => {
  await srv.close(0)
  await app.close()
  await worker.close()
  await transport.close()
  await floorServer.close()
  agent.destroy()
})

describe('cohort serve: a finished request leaves nothing for the young-generation GC to keep', () => {
  it("OIP infer: bytes surviving a scavenge per request, against a bare node:http server's", async () => {
    const floor = await survivingBytesPerRequest(() => post(floorServer.port, '/'))
    const serve = await survivingBytesPerRequest(() => post(srv.port, '/v2/models/tensor/infer'))
    console.log(`surviving bytes per request: cohort serve ${Math.round(serve)}, bare node:http ${Math.round(floor)}`)
    // 7.7-8.4 KB measured (2026-12-04, after docs/bench/hot-path-6-2026-12-04.md's changes; 13.8-14.3
    // KB on 2026-12-03); 33.6 KB with the WeakMaps, Map.clear() and the spread-built arrival restored.
    expect(serve).toBeLessThan(12_288 + floor)
  })
})
