// gateway, two workers and nats-server as separate processes, talking over real NATS.
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'
import { defineServingSuite } from './serving-suite.ts'

defineServingSuite('over NATS: gateway + 2 worker processes', async (fx) => {
  const nats: NatsServerHandle = await startNatsServer()
  const models = [`demo=${fx.demo}`, `multi-io=${fx.multiIo}`, `identity=${fx.identity}`, `varlen=${fx.varlen}`]
  const workers: CliProcess[] = []
  const metricsUrls: string[] = []
  for (const id of ['w1', 'w2']) {
    const w = spawnCohort([
      'worker',
      '--nats',
      nats.url,
      '--id',
      id,
      '--threads',
      '1',
      '--metrics-port',
      '0',
      ...models.flatMap((m) => ['--model', m]),
      '--predictor',
      SLEEPY_PREDICTOR,
    ])
    const [, port] = await w.waitFor(/metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/, 60_000)
    await w.waitFor(/serving/, 60_000)
    metricsUrls.push(`http://127.0.0.1:${port}/metrics`)
    workers.push(w)
  }
  // Messages past max_payload travel in chunks up to --max-request-bytes (64 MiB by default); 1 MiB
  // here so the suite's 413 case means the same as in the in-process env (test/e2e/large-payloads.test.ts
  // covers chunking).
  const gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--max-request-bytes', String(1024 * 1024)])
  const [, gwPort] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  let live = [...workers]
  return {
    baseUrl: `http://127.0.0.1:${gwPort}`,
    async workerMetrics() {
      const texts = await Promise.all(
        metricsUrls.map((u) =>
          fetch(u)
            .then((r) => r.text())
            .catch(() => ''),
        ),
      )
      return texts.join('\n# EOF\n')
    },
    async stopOneWorker() {
      const w = live.shift()
      const code = await w?.stop('SIGTERM')
      if (code !== 0) {
        throw new Error(`worker exited with ${code}:\n${w?.output()}`)
      }
    },
    async stopAllWorkers() {
      await Promise.all(live.map((w) => w.stop('SIGTERM')))
      live = []
    },
    async close() {
      await Promise.all([...workers, gw].map((p) => p.stop('SIGKILL')))
      await nats.stop()
    },
  }
})
