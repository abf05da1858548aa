import { request as httpRequest, Agent } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createHook } from 'node:async_hooks'
import { it } from 'vitest'
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, OnnxRunner, PredictorRunner, loadPredictors } from '@cohort/worker'
import { serve } from '@hono/node-server'
import { SLEEPY_PREDICTOR, writeModelFixtures } from '@cohort/test-support'

const agent = new Agent({ keepAlive: true, maxSockets: 1 })
function post(url: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (d: Buffer) => chunks.push(d))
      res.on('end', () => resolve(Buffer.concat(chunks).toString()))
    })
    req.on('error', reject)
    req.end(body)
  })
}
it('probe', async () => {
  const dir = writeModelFixtures().dir
  const identity = join(dir, 'identity64.onnx')
  writeFileSync(identity, model(graph({ name: 'id', inputs: [valueInfo('in', 'FP32', ['batch', 64])], outputs: [valueInfo('out', 'FP32', ['batch', 64])], nodes: [node('Identity', ['in'], ['out'])] })))
  const transport = new InProcessTransport()
  const registry = new Registry()
  const [sleepy] = await loadPredictors(SLEEPY_PREDICTOR)
  const worker = new CohortWorker({ transport, registry, runners: [new OnnxRunner({ name: 'tensor', path: identity, intraOpNumThreads: 1 }), new PredictorRunner(sleepy!)] })
  await worker.start()
  const app = createApp({ transport, registry, requestTimeoutMs: 30_000 })
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => { const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s)) })
  const beat = transport.subscribe('cohort.heartbeat')
  for await (const _ of beat) break
  beat.unsubscribe()
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const path = process.env.PROBE_PATH ?? '/v2/models/tensor/infer'
  const body = path.includes('tensor') ? JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 64], data: Array.from({ length: 64 }, (_, i) => i / 8) }] }) : JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [2] }, { name: 'sleepMs', datatype: 'FP64', shape: [1], data: [0] }] })
  for (let i = 0; i < 30; i++) await post(base + path, body)
  const sites = new Map<string, number>()
  const N = 50
  const hook = createHook({ init(_id, type) {
    if (type !== 'PROMISE' && type !== 'Timeout' && type !== 'Immediate') return
    const st = (new Error().stack ?? '').split('\n').slice(2).map((l) => l.trim())
    const own = st.filter((l) => !l.includes('node:internal') && !l.includes('async_hooks')).slice(0, 2).map((l) => l.replace(/^at /, '').replace(/\(\/work\/wt\/hot\//, '(').replace(/file:\/\/\/work\/wt\/hot\//, ''))
    const k = `${type} ${own.join(' <- ')}`
    sites.set(k, (sites.get(k) ?? 0) + 1)
  } })
  Error.stackTraceLimit = 30
  hook.enable()
  for (let i = 0; i < N; i++) await post(base + path, body)
  hook.disable()
  const rows = [...sites].map(([k, v]) => [v / N, k] as const).sort((a, b) => b[0] - a[0])
  console.log(rows.filter((r) => r[0] >= 0.5).map(([v, k]) => `${v.toFixed(2)}  ${k}`).join('\n'))
  await worker.close(); await new Promise<void>((r) => server.close(() => r())); await transport.close(); agent.destroy()
}, 120_000)
