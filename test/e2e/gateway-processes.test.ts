// `cohort gateway --processes 2` over a real nats-server and a `cohort worker` of the sleepy
// predictor: requests on fresh connections are answered by both gateway processes (their distinct
// gateway ids in /metrics, each with OK requests counted), requests in flight at SIGTERM are still
// answered, and SIGTERM to the primary stops every child and exits 0.
import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePrometheus } from '@cohort/metrics'
import { SLEEPY_PREDICTOR, pool, readSleepyLog, sleepyLogPath, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const LOG = sleepyLogPath()
const procs: CliProcess[] = []
let nats: NatsServerHandle
let gw: CliProcess
let base = ''
let pids: number[] = []

/** One HTTP exchange on its own TCP connection (no keep-alive pool), so the primary hands each to a child. */
function fresh(method: 'GET' | 'POST', url: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const req = request(url, { method, agent: false, headers: { connection: 'close', ...(data ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(data)
  })
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

beforeAll(async () => {
  nats = await startNatsServer()
  const w = spawnCohort(['worker', '--nats', nats.url, '--id', 'gps', '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', '8'], {
    SLEEPY_MS: '300',
    SLEEPY_LOG: LOG,
  })
  procs.push(w)
  await w.waitFor(/worker gps serving sleepy/, 60_000)
  gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--processes', '2'])
  procs.push(gw)
  const m = await gw.waitFor(/2 gateway processes listening \(pids (\d+), (\d+)\)/, 60_000)
  pids = [Number(m[1]), Number(m[2])]
  base = (await gw.waitFor(/gateway on (http:\/\/\S+) /, 60_000))[1]!
}, 120_000)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  for (const pid of pids.filter(alive)) {
    process.kill(pid, 'SIGKILL')
  }
  await ifStarted(nats)?.stop()
})

describe('cohort gateway --processes 2', () => {
  it('answers requests from both processes: two gateway ids in /metrics, each with OK requests', async () => {
    expect(new Set(pids).size).toBe(2)
    expect(pids.every(alive)).toBe(true)
    const xs = Array.from({ length: 24 }, (_, i) => i + 1)
    const answers = await pool(xs, 8, (x) => fresh('POST', `${base}/models/sleepy/predictions`, { input: { x } }))
    for (const [i, a] of answers.entries()) {
      expect(a.status).toBe(200)
      expect(JSON.parse(a.text).output).toMatchObject({ y: 2 * xs[i]! })
    }
    // A scrape sees the process that accepted its connection: scrape until both have answered.
    const seen = new Map<string, number>()
    for (let k = 0; k < 40 && seen.size < 2; k++) {
      const r = await fresh('GET', `${base}/metrics`)
      expect(r.status).toBe(200)
      const m = parsePrometheus(r.text)
      const ids = [...m.keys()].flatMap((key) => key.match(/^cohort_gateway_info\{gateway="([^"]+)"\}$/)?.[1] ?? [])
      expect(ids).toHaveLength(1) // one gateway (HTTP) per process, no gRPC here
      seen.set(ids[0]!, m.get('cohort_requests_total{code="OK",model="sleepy"}') ?? 0)
    }
    expect(seen.size).toBe(2)
    const counts = [...seen.values()]
    expect(counts.every((n) => n > 0)).toBe(true)
    expect(counts.reduce((a, b) => a + b, 0)).toBe(xs.length)
  })

  it('on SIGTERM answers the requests in flight, stops every child and exits 0', async () => {
    const before = readSleepyLog(LOG).length
    const xs = [101, 102, 103, 104, 105, 106]
    const inflight = xs.map((x) => fresh('POST', `${base}/models/sleepy/predictions`, { input: { x } }))
    // Wait until the worker runs them all (the gateways have received every one), then SIGTERM.
    const until = Date.now() + 30_000
    while (
      readSleepyLog(LOG)
        .slice(before)
        .filter((e) => e.event === 'start')
        .flatMap((e) => e.xs).length < xs.length
    ) {
      expect(Date.now()).toBeLessThan(until)
      await new Promise((r) => setTimeout(r, 20))
    }
    gw.proc.kill('SIGTERM')
    const answers = await Promise.all(inflight)
    expect(answers.map((a) => a.status)).toEqual(xs.map(() => 200))
    expect(answers.map((a) => JSON.parse(a.text).output.y)).toEqual(xs.map((x) => 2 * x))
    expect(await gw.exited).toBe(0)
    expect(gw.output()).toMatch(/SIGTERM, stopping 2 gateway processes/)
    for (const pid of pids) {
      expect(alive(pid)).toBe(false)
    }
  })
})
