// A TS predictor that misbehaves, over real NATS with a real gateway and worker process
// (docs/reliability.md#batch-time-limit, docs/architecture.md#predictor-threads):
// - a predict() that computes synchronously (blocking its thread until the test opens a gate file)
//   does not block the worker: its heartbeats go on while it computes (predict() runs in a worker
//   thread), and it answers 200, not 503 WORKER_LOST;
// - a predict() that never returns is stopped at --batch-timeout-ms: 504 BATCH_TIMEOUT, readiness
//   (OIP model ready, the worker's probe, Cog /health-check) reports it until a new thread has run
//   setup() again (held by a gate file until those are checked), the restart is counted in
//   /metrics, and the model then serves again.
// No duration is asserted: each "while" is a state held by a gate.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeHeartbeat } from '@cohort/protocol'
import { BUSY_PREDICTOR, getJson, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

const LIMIT_MS = 6_000
const dir = mkdtempSync(join(tmpdir(), 'cohort-stuck-'))
/** Opened (created) to end the synchronous computation. */
const computeGate = join(dir, 'compute')
/** Opened to let a restarted thread's setup() finish (armed by `<file>.armed`). */
const setupGate = join(dir, 'setup')

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
    { BUSY_GATE: computeGate, BUSY_SETUP_GATE: setupGate },
  )
  ;[, probes] = (await worker.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000)) as [string, string]
  await worker.waitFor(/worker wb serving busy/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
  nc = await connect({ servers: nats.url })
})

afterAll(async () => {
  writeFileSync(computeGate, '')
  writeFileSync(setupGate, '')
  await ifStarted(nc)?.close()
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

describe('a TS predictor that blocks or hangs', () => {
  it('answers a synchronous predict() with 200, not 503 WORKER_LOST, and heartbeats go on while it computes', async () => {
    let beats = 0
    const sub = nc.subscribe('cohort.heartbeat')
    void (async () => {
      for await (const m of sub) {
        if (decodeHeartbeat(m.data).id === 'wb' && existsSync(`${computeGate}.computing`)) {
          beats++
        }
      }
    })()
    await nc.flush()
    const r = postJson(`${base}/models/busy/predictions`, { input: { x: 21, syncGate: true } }, { 'x-cohort-timeout-ms': '120000' })
    // The predictor's thread computes from the moment it wrote the marker until the gate opens:
    // two heartbeats sent meanwhile show the worker's main thread is not blocked. A predict() on
    // the main thread would send none (the bound only catches that hang).
    for (const end = Date.now() + 60_000; beats < 2; await new Promise((res) => setTimeout(res, 50))) {
      expect(Date.now(), `heartbeats heard while computing: ${beats}`).toBeLessThan(end)
    }
    writeFileSync(computeGate, '')
    const res = await r
    sub.unsubscribe()
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.output).toMatchObject({ y: 42 })
  }, 120_000)

  it('stops a batch past --batch-timeout-ms with 504 BATCH_TIMEOUT, reports not ready until it is back, counts it', async () => {
    const before = await postJson(`${base}/models/busy/predictions`, { input: { x: 1 } })
    expect(before.status).toBe(200)
    const thread = (before.body.output as { thread: number }).thread

    writeFileSync(`${setupGate}.armed`, '') // the replacement thread's setup() waits for the gate
    const r = await postJson(`${base}/models/busy/predictions`, { input: { x: 1, spin: true } }, { 'x-cohort-timeout-ms': '25000' })
    expect(r.status, JSON.stringify(r.body)).toBe(504)
    expect(r.body.code).toBe('BATCH_TIMEOUT')
    expect(String(r.body.error ?? r.body.message)).toMatch(/time limit of 6000 ms/)

    // The new thread's setup() is held: until it ends every readiness signal says so.
    const [ready, probe, health] = await Promise.all([fetch(`${base}/v2/models/busy/ready`), fetch(`${probes}/v2/health/ready`), getJson(`${base}/health-check`)])
    expect(ready.status).toBe(503)
    expect(probe.status).toBe(503)
    expect(health.body.status).toBe('STARTING')
    writeFileSync(setupGate, '')

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
  }, 120_000)
})
