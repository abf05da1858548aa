// The same suite over the in-process transport: gateway and worker in this process (embedded mode).
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, OnnxRunner, PredictorRunner, loadPredictors } from '@cohort/worker'
import { SLEEPY_PREDICTOR } from '@cohort/test-support'
import { serve } from '@hono/node-server'
import type { AddressInfo } from 'node:net'
import { defineServingSuite } from './serving-suite.ts'

defineServingSuite('in-process transport (embedded)', async (fx) => {
  // Same limit as NATS's default so the 413 case means the same thing.
  const transport = new InProcessTransport({ maxMessageBytes: 1024 * 1024 })
  const registry = new Registry()
  const [sleepy] = await loadPredictors(SLEEPY_PREDICTOR)
  const runners = [
    new OnnxRunner({ name: 'demo', path: fx.demo, intraOpNumThreads: 1 }),
    new OnnxRunner({ name: 'multi-io', path: fx.multiIo, intraOpNumThreads: 1 }),
    new OnnxRunner({ name: 'identity', path: fx.identity, intraOpNumThreads: 1 }),
    new OnnxRunner({ name: 'varlen', path: fx.varlen, intraOpNumThreads: 1 }),
    new PredictorRunner(sleepy!),
  ]
  const worker = new CohortWorker({ transport, runners, registry, outputSchemas: { sleepy: sleepy!.output } })
  await worker.start()
  const app = createApp({ transport, registry })
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
  })
  const port = (server.address() as AddressInfo).port
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    workerMetrics: () => Promise.resolve(registry.render()),
    stopOneWorker: () => worker.drain(),
    stopAllWorkers: () => worker.drain(),
    async close() {
      await worker.close()
      await new Promise<void>((r) => server.close(() => r()))
      await transport.close()
    },
  }
})
