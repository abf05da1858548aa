// Scaling measurement (issue 6, item 3): throughput of 1, 2 and 4 workers of the sleep-based sleepy
// predictor, one request at a time per worker (--max-batch-size 1) so that a worker's capacity is
// exactly 1000 / (SLEEPY_MS + overhead) requests/s, each worker on its own test host, one NATS server
// and the gateway on two more. Sleeping costs no CPU, so 4 workers do not saturate 2 cores; the
// closed loop keeps 4 requests per worker in flight. Workers are added between runs (1 -> 2 -> 4).
import { Lab, type HostProcess } from './cluster.ts'
import { check, closeAgent, closedLoop, waitServing } from './load.ts'

/** One row of the scaling table. */
export interface ScalingRow {
  workers: number
  requests: number
  failed: number
  mismatched: number
  rps: number
  /** rps / rps of 1 worker. */
  speedup: number
  /** speedup / workers (target >= 0.9). */
  efficiency: number
}

/** Options of {@link measureScaling}. */
export interface ScalingOptions {
  /** Worker counts, increasing. @default [1, 2, 4] */
  counts?: number[]
  /** Cost of one request (sleep), ms. @default 50 */
  costMs?: number
  /** Measured time per count, ms (after a 1 s warm-up). @default 6000 */
  durationMs?: number
  /** In-flight requests per worker. @default 4 */
  perWorker?: number
}

export async function measureScaling(o: ScalingOptions = {}): Promise<{ rows: ScalingRow[]; costMs: number }> {
  const counts = o.counts ?? [1, 2, 4]
  const costMs = o.costMs ?? 50
  const durationMs = o.durationMs ?? 6000
  const perWorker = o.perWorker ?? 4
  const lab = new Lab()
  const rows: ScalingRow[] = []
  let x = 1
  try {
    const max = Math.max(...counts)
    for (const h of ['n1', 'gw', ...Array.from({ length: max }, (_, i) => `w${i + 1}`)]) lab.net.addHost(h)
    const { urls } = await lab.nats(['n1'])
    const gw = await lab.gateway('gw', urls)
    const workers: HostProcess[] = []
    for (const n of counts) {
      const add = Array.from({ length: n - workers.length }, (_, i) => workers.length + i + 1)
      workers.push(...(await Promise.all(add.map((k) => lab.worker(`w${k}`, urls, `scale-${k}`, { sleepMs: costMs, args: ['--max-batch-size', '1'] })))))
      await waitServing(gw.url)
      await closedLoop(gw.url, { concurrency: perWorker * n, durationMs: 1000, nextX: () => x++ }) // warm-up
      const { outcomes, seconds } = await closedLoop(gw.url, { concurrency: perWorker * n, durationMs, nextX: () => x++ })
      const c = check(outcomes)
      const rps = c.ok / seconds
      const base = rows[0]?.rps ?? rps / n
      rows.push({
        workers: n,
        requests: outcomes.length,
        failed: c.failed.length,
        mismatched: c.mismatched.length,
        rps,
        speedup: rps / base,
        efficiency: rps / base / n,
      })
    }
  } finally {
    closeAgent()
    await lab.close()
  }
  return { rows, costMs }
}

/** The table as text (markdown). */
export function scalingTable(r: { rows: ScalingRow[]; costMs: number }): string {
  const lines = [
    `| workers | requests | failed | req/s | speedup vs 1 worker | efficiency (speedup / N, target >= 0.9) |`,
    `| ---: | ---: | ---: | ---: | ---: | ---: |`,
    ...r.rows.map((w) => `| ${w.workers} | ${w.requests} | ${w.failed} | ${w.rps.toFixed(1)} | ${w.speedup.toFixed(2)} | ${w.efficiency.toFixed(2)} |`),
  ]
  return lines.join('\n')
}
