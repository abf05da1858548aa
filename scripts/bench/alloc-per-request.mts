// Bytes allocated on the V8 heap per request, embedded (`cohort serve`'s stack in this process:
// in-process bus, a worker with an ONNX Identity of 64 floats, the gateway on real HTTP), at
// concurrency 1. The heap's growth over windows of WINDOW requests in which no GC ran (counted by
// a PerformanceObserver), median over the windows: what a request leaves for the collector,
// client included. A count for before/after comparisons (run it from each checkout), not a budget.
// usage: npx tsx scripts/bench/alloc-per-request.mts [REQUESTS=2000] [WINDOW=10]
// (run with NODE_OPTIONS=--max-semi-space-size=64 for more GC-free windows)
import { writeFileSync, mkdtempSync } from 'node:fs'
import { Agent, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'
import { serve } from '@hono/node-server'
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, OnnxRunner } from '@cohort/worker'

const [requests = 2000, window = 10] = process.argv.slice(2).map(Number)
const F = 64
const path = join(mkdtempSync(join(tmpdir(), 'cohort-alloc-')), 'id.onnx')
writeFileSync(
  path,
  model(graph({ name: 'id', inputs: [valueInfo('in', 'FP32', ['b', F])], outputs: [valueInfo('out', 'FP32', ['b', F])], nodes: [node('Identity', ['in'], ['out'])] })),
)
const transport = new InProcessTransport()
const registry = new Registry()
const worker = new CohortWorker({ transport, registry, runners: [new OnnxRunner({ name: 'm', path, intraOpNumThreads: 1 })] })
await worker.start()
const app = createApp({ transport, registry, requestTimeoutMs: 30_000 })
const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
  const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
})
const port = (server.address() as AddressInfo).port
const agent = new Agent({ keepAlive: true, maxSockets: 1 })
const body = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, F], data: Array.from({ length: F }, (_, i) => i / 8) }] })
const one = () =>
  new Promise<void>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/v2/models/m/infer', method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))))
    })
    req.on('error', reject)
    req.end(body)
  })
let gcs = 0
const obs = new PerformanceObserver((list) => (gcs += list.getEntries().length))
obs.observe({ entryTypes: ['gc'] })
for (let i = 0; i < 300; i++) {
  await one() // warm-up: JIT, caches, first allocations
}
const perRequest: number[] = []
for (let done = 0; done < requests; done += window) {
  await new Promise((r) => setImmediate(r))
  const g0 = gcs
  const h0 = process.memoryUsage().heapUsed
  for (let i = 0; i < window; i++) {
    await one()
  }
  const h1 = process.memoryUsage().heapUsed
  await new Promise((r) => setImmediate(r)) // let the observer report a GC of this window
  if (gcs === g0 && h1 >= h0) {
    perRequest.push((h1 - h0) / window)
  }
}
obs.disconnect()
perRequest.sort((a, b) => a - b)
const median = perRequest[Math.floor(perRequest.length / 2)] ?? Number.NaN
console.log(`alloc per request (embedded ONNX infer, c=1): ${(median / 1024).toFixed(1)} KB median over ${perRequest.length} GC-free windows of ${window}`)
agent.destroy()
await worker.close()
await new Promise<void>((r) => server.close(() => r()))
await transport.close()
await app.close()
