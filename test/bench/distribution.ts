// Capacity-aware distribution, the rates: two workers of the sleepy predictor, one five times slower
// (20 vs 100 ms per batch of 16). Each worker's capacity alone (closed loop), then both together
// under an open loop at 95% of the summed capacity with a 1 s deadline budget, once per
// --distribution mode side by side. Prints goodput as a fraction of the summed capacity, p99 and
// the split by worker. (test/e2e/distribution.test.ts asserts the split by count only.)
//   node --import tsx test/bench/distribution.ts [SECONDS=4]
import { connect } from '@nats-io/transport-node'
import { createGatewayCore, type Upstream } from '@cohort/gateway'
import { CohortError } from '@cohort/protocol'
import { createNatsTransport } from '@cohort/transport'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess } from '@cohort/test-support'

const BATCH = 16
const SECONDS = Number(process.argv[2] ?? 4)

function startWorker(nats: string, id: string, sleepMs: number, mode: string): CliProcess {
  return spawnCohort(['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', String(BATCH), '--distribution', mode], {
    SLEEPY_MS: String(sleepMs),
  })
}

interface LoadResult {
  ok: number
  failed: number
  seconds: number
  p99: number
  byWorker: Record<string, number>
}

/** Closed loop with `concurrency` outstanding requests for `seconds`. */
async function closedLoop(up: Upstream, concurrency: number, seconds: number): Promise<number> {
  const end = Date.now() + seconds * 1000
  let ok = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const r = await up.infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: Date.now() + 5000, items: [{ x: 1 }] }, 5000, undefined).catch(() => undefined)
        if (r && !r.errors) {
          ok++
        }
      }
    }),
  )
  return ok / seconds
}

/** Open loop at a fixed rate for `seconds`; latency counted from each request's scheduled send time. */
async function openLoop(up: Upstream, rate: number, seconds: number, budgetMs: number): Promise<LoadResult> {
  const n = Math.round(rate * seconds)
  const t0 = Date.now() + 20
  const latencies: number[] = []
  const byWorker: Record<string, number> = {}
  let ok = 0
  let failed = 0
  const pending: Promise<void>[] = []
  for (let i = 0; i < n; i++) {
    const at = t0 + (i * 1000) / rate
    const wait = at - Date.now()
    if (wait > 1) {
      await new Promise((r) => setTimeout(r, wait))
    }
    pending.push(
      up.infer({ v: 1, id: crypto.randomUUID(), model: 'sleepy', deadline: at + budgetMs, items: [{ x: i }] }, budgetMs + 100, undefined).then(
        (r) => {
          latencies.push(Date.now() - at)
          if (r.errors) {
            failed++
          } else {
            ok++
            byWorker[r.worker ?? '?'] = (byWorker[r.worker ?? '?'] ?? 0) + 1
          }
        },
        (e: unknown) => {
          latencies.push(Date.now() - at)
          failed++
          if (!(e instanceof CohortError)) {
            throw e
          }
        },
      ),
    )
  }
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  return { ok, failed, seconds, p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0, byWorker }
}

const nats = await startNatsServer()
const nc = await connect({ servers: nats.url })
const up = createGatewayCore({ transport: createNatsTransport(nc), metaTimeoutMs: 2000, workerLoss: false }).upstream
try {
  for (const mode of ['capacity', 'random']) {
    const fastAlone = startWorker(nats.url, 'fast', 20, mode)
    await fastAlone.waitFor(/serving/, 60_000)
    const capFast = await closedLoop(up, 4 * BATCH, 2.5)
    await fastAlone.stop('SIGTERM')
    const slow = startWorker(nats.url, 'slow', 100, mode)
    await slow.waitFor(/serving/, 60_000)
    const capSlow = await closedLoop(up, 4 * BATCH, 2.5)
    const fast = startWorker(nats.url, 'fast', 20, mode)
    await fast.waitFor(/serving/, 60_000)
    const sum = capFast + capSlow
    const r = await openLoop(up, 0.95 * sum, SECONDS, 1000)
    const goodput = r.ok / r.seconds
    console.log(
      `${mode}: capacity fast ${capFast.toFixed(0)}/s, slow ${capSlow.toFixed(0)}/s; together ${goodput.toFixed(0)}/s ` +
        `(${(goodput / sum).toFixed(3)} of the sum), failed ${r.failed}, p99 ${Math.round(r.p99)} ms, by worker ${JSON.stringify(r.byWorker)}`,
    )
    await Promise.all([slow.stop('SIGTERM'), fast.stop('SIGTERM')])
  }
} finally {
  await nc.close()
  await nats.stop()
}
