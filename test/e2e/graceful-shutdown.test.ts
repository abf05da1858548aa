// Graceful shutdown on SIGTERM, with the sleep-based sleepy predictor so that the in-flight
// requests outlast every grace period on any machine.
// - Worker: its probes (`--metrics-port`: /v2/health/live, /v2/health/ready) answer; on SIGTERM
//   readiness turns 503 at once, every accepted request is still answered, and it exits 0.
// - Gateway (`--drain-ms`): /v2/health/ready answers 503 at once while requests are still accepted
//   and served for the grace period; then it stops listening, finishes every in-flight request and
//   exits 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePrometheus } from '@cohort/metrics'
import { SLEEPY_PREDICTOR, postJson, readSleepyLog, sleepyLogPath, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const DRAIN_MS = 1_500
const SLOW_MS = 2_500
/** These requests outlast the model's server-side SLO on purpose: they say they can wait. */
const LONG = { 'x-cohort-timeout-ms': '30000' }

let nats: NatsServerHandle
let worker: CliProcess | undefined
let gateway: CliProcess
let base = ''
const procs: CliProcess[] = []
const LOG = sleepyLogPath()

function startWorker(id: string, extra: string[] = []): CliProcess {
  const w = spawnCohort(['worker', '--nats', nats.url, '--id', id, '--threads', '1', '--predictor', SLEEPY_PREDICTOR, ...extra], { SLEEPY_LOG: LOG })
  procs.push(w)
  return w
}

/**
 * Wait until the worker holds every request of `xs`: each has started in a batch (SLEEPY_LOG) or
 * is in its queue (`cohort_queue_depth` on its metrics port). The signal that they were accepted,
 * instead of a sleep.
 */
async function heldByWorker(probes: string, xs: number[]): Promise<void> {
  const end = Date.now() + 30_000
  for (;;) {
    const started = new Set(
      readSleepyLog(LOG)
        .flatMap((e) => (e.event === 'start' ? e.xs : []))
        .filter((x) => xs.includes(x)),
    )
    const m = parsePrometheus(await (await fetch(`${probes}/metrics`)).text())
    const queued = m.get('cohort_queue_depth{model="sleepy"}') ?? 0
    if (started.size + queued >= xs.length && started.size > 0) {
      return
    }
    if (Date.now() > end) {
      throw new Error(`the worker holds ${started.size} started + ${queued} queued of ${xs.length} requests`)
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}

beforeAll(async () => {
  nats = await startNatsServer()
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', String(DRAIN_MS)])
  procs.push(gateway)
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

describe('worker SIGTERM drain', () => {
  it('turns its readiness probe to 503 and answers every accepted request before it exits 0', async () => {
    const w = startWorker('d0', ['--metrics-port', '0'])
    const [, probes] = await w.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000)
    await w.waitFor(/worker d0 serving sleepy/, 60_000)
    expect((await fetch(`${probes}/v2/health/live`)).status).toBe(200)
    const ready = await fetch(`${probes}/v2/health/ready`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toEqual({ ready: true, draining: false })

    const inflight = Array.from({ length: 6 }, (_, x) => postJson(`${base}/models/sleepy/predictions`, { input: { x, sleepMs: SLOW_MS } }, LONG))
    await heldByWorker(probes!, [0, 1, 2, 3, 4, 5])
    const child = { exited: false } // set by the callback, read by the loop below (a property: each read sees the latest)
    void w.exited.then(() => (child.exited = true))
    w.proc.kill('SIGTERM')
    let drainingSeen = false
    while (!child.exited) {
      const r = await fetch(`${probes}/v2/health/ready`).catch(() => undefined)
      if (r?.status === 503) {
        expect(await r.json()).toEqual({ ready: false, draining: true })
        drainingSeen = true
        break
      }
      await r?.arrayBuffer()
      await new Promise((res) => setTimeout(res, 50))
    }
    expect(drainingSeen, 'worker readiness never answered 503 before exit').toBe(true)
    const replies = await Promise.all(inflight)
    replies.forEach((r, x) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(r.body.output.y).toBe(2 * x)
    })
    expect(await w.exited).toBe(0)
  })
})

describe('gateway SIGTERM drain (--drain-ms)', () => {
  it('answers 503 on readiness first, keeps serving, finishes in-flight requests, then exits 0', async () => {
    worker = startWorker('d1', ['--metrics-port', '0'])
    const [, probes] = await worker.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000)
    await worker.waitFor(/worker d1 serving sleepy/, 60_000)
    // Readiness needs a worker that answers: the drained d0 is gone, d1 is new.
    const until = Date.now() + 10_000
    while ((await fetch(`${base}/v2/health/ready`)).status !== 200 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100))
    }
    expect((await fetch(`${base}/v2/health/ready`)).status).toBe(200)
    let exitedAt = 0
    void gateway.exited.then(() => (exitedAt = Date.now()))
    // Slow requests in flight (one batch of SLOW_MS on the worker).
    const inflight = Array.from({ length: 8 }, (_, x) => postJson(`${base}/models/sleepy/predictions`, { input: { x: 10 + x, sleepMs: SLOW_MS } }, LONG))
    await heldByWorker(probes!, [10, 11, 12, 13, 14, 15, 16, 17])
    const sigterm = Date.now()
    gateway.proc.kill('SIGTERM')

    // Readiness flips to 503 (draining) while the process still runs.
    let readyAt = 0
    let readyBody: unknown
    while (Date.now() - sigterm < 10_000) {
      const r = await fetch(`${base}/v2/health/ready`)
      if (r.status === 503) {
        readyAt = Date.now()
        readyBody = await r.json()
        expect(r.headers.get('connection')).toBe('close')
        break
      }
      await r.arrayBuffer()
      await new Promise((res) => setTimeout(res, 50))
    }
    expect(readyAt, 'readiness never answered 503').toBeGreaterThan(0)
    expect(readyBody).toEqual({ ready: false, draining: true })
    expect(exitedAt, 'readiness flipped before exit').toBe(0)
    expect(gateway.output()).toMatch(/gateway draining: \/v2\/health\/ready answers 503 for 1500 ms/)

    // Still accepting and serving new requests during the grace period (liveness too). The new
    // request queues behind the slow batch, so it is answered after the grace period ends.
    const during = postJson(`${base}/models/sleepy/predictions`, { input: { x: 100 } }, LONG)
    expect((await fetch(`${base}/v2/health/live`)).status).toBe(200)
    expect(exitedAt).toBe(0)

    // Every in-flight request completes with its own answer, although it outlasts the grace period.
    const replies = await Promise.all(inflight)
    replies.forEach((r, x) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(r.body.output.y).toBe(2 * (10 + x))
    })
    const late = await during
    expect(late.status, JSON.stringify(late.body)).toBe(200)
    expect(late.body.output.y).toBe(200)
    expect(await gateway.exited).toBe(0)
    expect(exitedAt).toBeGreaterThanOrEqual(readyAt)
    // The process waited for its requests: at least the grace period after SIGTERM.
    expect(exitedAt - sigterm).toBeGreaterThanOrEqual(DRAIN_MS)
    await expect(fetch(`${base}/v2/health/live`)).rejects.toThrow()
  })
})
