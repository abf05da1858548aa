// Readiness of a hung model (docs/reliability.md#readiness-of-a-hung-model), over real NATS with a
// real gateway and worker process: a batch still running past the deadline of its items marks the
// model not ready (OIP model ready, the worker's probe, its heartbeats) until that batch ends, while
// an overloaded model (a long queue, batches completing) stays ready. The hung predict() waits on a
// gate file the test creates: no timers decide the outcome.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeHeartbeat, type Heartbeat } from '@cohort/protocol'
import { BUSY_PREDICTOR, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let nc: NatsConnection
let base = ''
let probes = ''
const dir = mkdtempSync(join(tmpdir(), 'cohort-hung-'))
const gate = join(dir, 'open')
const beats: Heartbeat[] = []

beforeAll(async () => {
  nats = await startNatsServer()
  // No batch time limit in reach (120 s): readiness must come from the stall itself.
  worker = spawnCohort(
    ['worker', '--nats', nats.url, '--id', 'wg', '--threads', '1', '--predictor', BUSY_PREDICTOR, '--max-batch-size', '1', '--batch-timeout-ms', '120000', '--metrics-port', '0'],
    { BUSY_GATE: gate },
  )
  ;[, probes] = (await worker.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000)) as [string, string]
  await worker.waitFor(/worker wg serving busy/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
  nc = await connect({ servers: nats.url })
  const sub = nc.subscribe('cohort.heartbeat')
  void (async () => {
    for await (const m of sub) {
      const h = decodeHeartbeat(m.data)
      if (h.id === 'wg') {
        beats.push(h)
      }
    }
  })()
  await nc.flush()
})

afterAll(async () => {
  await ifStarted(nc)?.close()
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const modelReady = async () => (await fetch(`${base}/v2/models/busy/ready`)).status
const workerReady = async () => (await fetch(`${probes}/v2/health/ready`)).status

/** Poll until `f` returns `want`; fails after `ms`. */
async function until<T>(f: () => Promise<T>, want: T, ms: number): Promise<void> {
  const end = Date.now() + ms
  for (;;) {
    if ((await f()) === want) {
      return
    }
    expect(Date.now(), `still not ${String(want)}`).toBeLessThan(end)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('readiness of a hung model', () => {
  it('stays ready while overloaded: a long queue of batches that complete', async () => {
    // One item per batch, 12 batches of 150 ms queued at once: about 1.8 s of queue.
    const load = Promise.all(
      Array.from({ length: 12 }, (_, i) => postJson(`${base}/models/busy/predictions`, { input: { x: i, busyMs: 150 } }, { 'x-cohort-timeout-ms': '60000' })),
    )
    const loading = { settled: false } // set by the callback, read by the loop below (a property: each read sees the latest)
    void load.then(() => (loading.settled = true))
    const seen: number[] = []
    while (!loading.settled) {
      seen.push(await modelReady(), await workerReady())
    }
    const replies = await load
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 200))
    expect(seen.length).toBeGreaterThanOrEqual(2)
    expect(seen.filter((s) => s !== 200)).toEqual([])
  })

  it('reports not ready while a batch runs past its deadline, and ready again once it ends', async () => {
    expect(await modelReady()).toBe(200)
    const hung = await postJson(`${base}/models/busy/predictions`, { input: { x: 5, gate: true } }, { 'x-cohort-timeout-ms': '1500' })
    expect(hung.status, JSON.stringify(hung.body)).toBe(504)

    // The batch is still running (the gate is closed), past its item's deadline.
    await until(modelReady, 503, 10_000)
    expect(await workerReady()).toBe(503)
    const meta = await fetch(`${base}/v2/models/busy/ready`)
    expect(await meta.json()).toMatchObject({ name: 'busy', ready: false })
    const n = beats.length
    await until(() => Promise.resolve(beats.slice(n).some((h) => h.stalled?.includes('busy'))), true, 5_000)

    writeFileSync(gate, '')
    await until(modelReady, 200, 20_000)
    expect(await workerReady()).toBe(200)
    const m = beats.length
    await until(() => Promise.resolve(beats.length > m && beats.slice(m).every((h) => h.stalled === undefined)), true, 5_000)
    const after = await postJson(`${base}/models/busy/predictions`, { input: { x: 3 } })
    expect(after.status).toBe(200)
    expect(after.body.output).toMatchObject({ y: 6 })
  })
})
