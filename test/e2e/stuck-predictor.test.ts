// A TS predictor that misbehaves, over real NATS with a real gateway and worker process
// (docs/reliability.md#batch-time-limit, docs/architecture.md#predictor-threads):
// - a predict() that computes synchronously for 4 s answers 200, not 503 WORKER_LOST, and the
//   worker's heartbeats go on meanwhile (predict() runs in a worker thread);
// - a predict() that never returns is stopped at --batch-timeout-ms: 504 BATCH_TIMEOUT, readiness
//   (OIP model ready, the worker's probe, Cog /health-check) reports it until a new thread has run
//   setup() again, the restart is counted in /metrics, and the model then serves again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeHeartbeat } from '@cohort/protocol'
import { BUSY_PREDICTOR, getJson, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const BUSY_MS = 4_000
const LIMIT_MS = 6_000
/** The gateway declares a worker lost after 3 missed heartbeats of 1 s (its defaults). */
const LOSS_MS = 3_000

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let nc: NatsConnection
let base = ''
let probes = ''

beforeAll(async () => {
  nats = await startNatsServer()
  worker = spawnCohort(
    ['worker', '--nats', nats.url, '--id', 'wb', '--threads', '1', '--predictor', BUSY_PREDICTOR, '--batch-timeout-ms', String(LIMIT_MS), '--metrics-port', '0'],
    { BUSY_SETUP_MS: '1500' },
  )
  ;[, probes] = (await worker.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000)) as [string, string]
  await worker.waitFor(/worker wb serving busy/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
  nc = await connect({ servers: nats.url })
})

afterAll(async () => {
  await nc?.close()
  await Promise.all([worker, gateway].map((p) => p?.stop('SIGKILL')))
  await nats?.stop()
})

describe('a TS predictor that blocks or hangs', () => {
  it('answers a 4 s synchronous predict() with 200, not 503 WORKER_LOST, and heartbeats go on', async () => {
    const beats: number[] = []
    const sub = nc.subscribe('cohort.heartbeat')
    void (async () => {
      for await (const m of sub) {
        if (decodeHeartbeat(m.data).id === 'wb') {
          beats.push(Date.now())
        }
      }
    })()
    await nc.flush()
    const t0 = Date.now()
    const r = await postJson(`${base}/models/busy/predictions`, { input: { x: 21, busyMs: BUSY_MS } }, { 'x-cohort-timeout-ms': '25000' })
    const t1 = Date.now()
    sub.unsubscribe()
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body.output).toMatchObject({ y: 42 })
    expect(t1 - t0).toBeGreaterThanOrEqual(BUSY_MS)
    // Every silence of the worker while it computed was shorter than the gateway's loss threshold.
    const during = beats.filter((t) => t >= t0 && t <= t1)
    expect(during.length).toBeGreaterThanOrEqual(2)
    const gaps = [during[0]! - t0, ...during.slice(1).map((t, i) => t - during[i]!), t1 - during[during.length - 1]!]
    expect(Math.max(...gaps)).toBeLessThan(LOSS_MS)
  })

  it('stops a batch past --batch-timeout-ms with 504 BATCH_TIMEOUT, reports not ready until it is back, counts it', async () => {
    const before = await postJson(`${base}/models/busy/predictions`, { input: { x: 1 } })
    expect(before.status).toBe(200)
    const thread = (before.body.output as { thread: number }).thread

    const r = await postJson(`${base}/models/busy/predictions`, { input: { x: 1, spin: true } }, { 'x-cohort-timeout-ms': '25000' })
    expect(r.status, JSON.stringify(r.body)).toBe(504)
    expect(r.body.code).toBe('BATCH_TIMEOUT')
    expect(String(r.body.error ?? r.body.message)).toMatch(/time limit of 6000 ms/)

    // The new thread's setup() takes 1.5 s: until then every readiness signal says so.
    const [ready, probe, health] = await Promise.all([
      fetch(`${base}/v2/models/busy/ready`),
      fetch(`${probes}/v2/health/ready`),
      getJson(`${base}/health-check`),
    ])
    expect(ready.status).toBe(503)
    expect(probe.status).toBe(503)
    expect(health.body.status).toBe('STARTING')

    const until = Date.now() + 60_000
    while ((await fetch(`${base}/v2/models/busy/ready`)).status !== 200) {
      expect(Date.now()).toBeLessThan(until)
      await new Promise((res) => setTimeout(res, 100))
    }
    expect((await fetch(`${probes}/v2/health/ready`)).status).toBe(200)
    expect((await getJson(`${base}/health-check`)).body.status).toBe('READY')
    const after = await postJson(`${base}/models/busy/predictions`, { input: { x: 3 } })
    expect(after.status).toBe(200)
    expect(after.body.output).toMatchObject({ y: 6, setups: 1 })
    expect((after.body.output as { thread: number }).thread).not.toBe(thread)

    const metrics = await (await fetch(`${probes}/metrics`)).text()
    expect(metrics).toMatch(/^cohort_runner_restarts_total\{model="busy",reason="batch_timeout"\} 1$/m)
    expect(metrics).toMatch(/^cohort_worker_items_total\{code="BATCH_TIMEOUT",model="busy"\} 1$/m)
  })
})
