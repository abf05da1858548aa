// kill -9 of one of two workers under load (docs/architecture.md#worker-loss), over real NATS with a
// real gateway and two worker processes: the requests the killed worker held get 503 WORKER_LOST with
// Retry-After before their 2 s deadline (its connection's subscriptions are gone at once, which the
// gateway's probes see), not a 504 at the deadline; the other worker's requests are answered 200
// with their own result. The kill happens while a batch is known to run on that worker (its
// SLEEPY_LOG line), not after a sleep. Both roles use their users of infra/nats/auth.conf, so the
// probes work with the permissions a deployment has. Workers without admission: what this test
// checks is worker loss, not whether a resent request can still finish in time.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  postJson,
  readSleepyLog,
  sleepyLogPath,
  SLEEPY_PREDICTOR,
  spawnCohort,
  startNatsServer,
  type CliProcess,
  type NatsServerHandle,
  ifStarted,
  allStarted,
} from '@cohort/test-support'

const DEADLINE_MS = 2000
const AUTH_CONF = readFileSync(new URL('../../infra/nats/auth.conf', import.meta.url), 'utf8')
const GATEWAY_PASS = `gw-${randomBytes(12).toString('hex')}`
const WORKER_PASS = `wk-${randomBytes(12).toString('hex')}`
let nats: NatsServerHandle
const workers: CliProcess[] = []
let gateway: CliProcess
let base = ''
const log = sleepyLogPath()

beforeAll(async () => {
  nats = await startNatsServer({
    extraConfig: `COHORT_NATS_GATEWAY_PASS: "${GATEWAY_PASS}"\nCOHORT_NATS_WORKER_PASS: "${WORKER_PASS}"\nCOHORT_NATS_ADMIN_PASS: "unused-${WORKER_PASS}"\n${AUTH_CONF}`,
  })
  for (const id of ['wk1', 'wk2']) {
    const w = spawnCohort(['worker', '--nats', nats.url, '--nats-user', 'worker', '--id', id, '--predictor', SLEEPY_PREDICTOR, '--no-admission'], {
      COHORT_NATS_PASS: WORKER_PASS,
      SLEEPY_MS: '400',
      SLEEPY_LOG: log,
    })
    workers.push(w)
    await w.waitFor(new RegExp(`worker ${id} serving sleepy`), 60_000)
  }
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--nats-user', 'gateway', '--port', '0'], { COHORT_NATS_PASS: GATEWAY_PASS })
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
  // Both workers heard (heartbeats, probes answered) and warm.
  for (let i = 0; i < 4; i++) {
    expect((await postJson(`${base}/models/sleepy/predictions`, { input: { x: 1000 + i, sleepMs: 0 } }, { 'x-cohort-timeout-ms': '20000' })).status).toBe(200)
  }
})

afterAll(async () => {
  await Promise.all(allStarted(...workers, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

describe('kill -9 of one of two workers under load', () => {
  it('answers the killed worker’s in-flight requests 503 WORKER_LOST with Retry-After before their deadline', async () => {
    const n = 8
    const sent = Date.now()
    const replies = Promise.all(
      Array.from({ length: n }, (_, x) =>
        postJson(`${base}/models/sleepy/predictions`, { input: { x } }, { 'x-cohort-timeout-ms': String(DEADLINE_MS) }).then((r) => ({ x, ...r, ms: Date.now() - sent })),
      ),
    )
    // Wait until a batch of this load runs on some worker, then kill that worker.
    let victim: number | undefined
    let held: number[] = []
    for (const end = Date.now() + 10_000; victim === undefined; ) {
      const start = readSleepyLog(log).find((e) => e.event === 'start' && e.xs.some((x) => x < n))
      if (start) {
        victim = start.pid
        held = start.xs
      } else {
        expect(Date.now(), 'no batch of the load started').toBeLessThan(end)
        await new Promise((r) => setTimeout(r, 10))
      }
    }
    const w = workers.find((p) => p.proc.pid === victim)!
    const killedAt = Date.now()
    w.proc.kill('SIGKILL')
    await w.exited
    const out = await replies
    const table = JSON.stringify({
      killedAfterMs: killedAt - sent,
      victim: w.proc.pid === workers[0]?.proc.pid ? 'wk1' : 'wk2',
      held,
      out: out.map((r) => [r.x, r.status, r.ms, (r.body as { error?: string }).error?.slice(0, 80)]),
    })
    for (const r of out) {
      if (r.status === 200) {
        expect((r.body as { output: { y: number } }).output.y).toBe(2 * r.x)
      } else {
        expect(r.status, table).toBe(503)
        expect((r.body as { code: string }).code).toBe('WORKER_LOST')
        expect(r.headers.get('retry-after')).toBe('1')
        expect(r.ms).toBeLessThan(DEADLINE_MS)
      }
    }
    // Every request of the killed worker's running batch was lost, none timed out.
    for (const x of held) {
      expect(out[x]?.status, `x=${x}`).toBe(503)
    }
    expect(out.filter((r) => r.status === 504)).toEqual([])
  })
})
