// Through real `cohort gateway` processes over real NATS, with a `cohort worker` process of the
// sleepy predictor: authentication by API key and JWT, the per-client rate limit (429) and CORS as
// a browser sees them (unit tests cover the middleware; this is the wiring of the flags), and
// admission across processes: a request the worker's admission refuses (503 OVERLOADED, Retry-After,
// never run) while the requests queued ahead of it are all served.
import { createHmac } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePrometheus } from '@cohort/metrics'
import {
  SLEEPY_PREDICTOR,
  postJson,
  readSleepyLog,
  sleepyLogPath,
  sleepyRuns,
  spawnCohort,
  startNatsServer,
  type CliProcess,
  type NatsServerHandle,
  ifStarted,
} from '@cohort/test-support'

const SECRET = 'gateway-process-test-secret'
const LOG = sleepyLogPath()
const COST_MS = 300
const procs: CliProcess[] = []
let nats: NatsServerHandle
let secured = ''
let plain = ''
let probes = ''

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')
/** An HS256 JWT. */
function jwt(payload: Record<string, unknown>, secret = SECRET): string {
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(payload)}`
  return `${head}.${createHmac('sha256', secret).update(head).digest('base64url')}`
}
const inAnHour = () => Math.floor(Date.now() / 1000) + 3600

async function gateway(args: string[]): Promise<string> {
  const p = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', ...args])
  procs.push(p)
  const m = await p.waitFor(/gateway on (http:\/\/\S+) /, 60_000)
  return m[1]!
}

const predict = (base: string, x: number, headers: Record<string, string> = {}) => postJson(`${base}/models/sleepy/predictions`, { input: { x } }, headers)

beforeAll(async () => {
  nats = await startNatsServer()
  const w = spawnCohort(['worker', '--nats', nats.url, '--id', 'gp', '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', '1', '--metrics-port', '0'], {
    SLEEPY_MS: String(COST_MS),
    SLEEPY_LOG: LOG,
  })
  procs.push(w)
  probes = (await w.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/, 60_000))[1]!
  await w.waitFor(/worker gp serving sleepy/, 60_000)
  ;[secured, plain] = await Promise.all([
    gateway([
      '--api-key',
      'key-1',
      '--api-key',
      'key-2',
      '--jwt-secret',
      SECRET,
      '--jwt-issuer',
      'cohort-test',
      '--jwt-scope',
      'predict',
      // 1 request per 100 s after a burst of 3: the bucket does not refill during the test.
      '--rate-limit',
      '0.01:3',
      '--cors-origin',
      'https://app.example',
    ]),
    // The worker's own admission is what the admission test below checks: without the door's
    // worker-wait check (test/e2e/door-refusals.test.ts), which would refuse the same request earlier.
    gateway(['--no-worker-wait']),
  ])
}, 120_000)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

describe('a gateway process with --api-key, --jwt-*, --rate-limit and --cors-origin', () => {
  it('accepts an API key and a valid JWT; refuses a missing, forged, expired or foreign token with 401, a token without the scope with 403', async () => {
    expect((await predict(secured, 1, { authorization: 'Bearer key-1' })).body.output).toMatchObject({ y: 2 })
    const good = jwt({ sub: 'alice', iss: 'cohort-test', scope: 'read predict', exp: inAnHour() })
    expect((await predict(secured, 2, { authorization: `Bearer ${good}` })).body.output).toMatchObject({ y: 4 })

    const none = await predict(secured, 3)
    expect(none.status).toBe(401)
    expect(none.body.code).toBe('UNAUTHORIZED')
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/)
    for (const [why, token] of [
      ['forged', jwt({ sub: 'mallory', iss: 'cohort-test', scope: 'predict', exp: inAnHour() }, 'another-secret')],
      ['expired', jwt({ sub: 'bob', iss: 'cohort-test', scope: 'predict', exp: Math.floor(Date.now() / 1000) - 60 })],
      ['foreign issuer', jwt({ sub: 'carol', iss: 'elsewhere', scope: 'predict', exp: inAnHour() })],
      ['not a key', 'key-3'],
    ] as const) {
      const r = await predict(secured, 4, { authorization: `Bearer ${token}` })
      expect({ why, status: r.status, code: r.body.code }).toEqual({ why, status: 401, code: 'UNAUTHORIZED' })
    }
    const noScope = await predict(secured, 5, { authorization: `Bearer ${jwt({ sub: 'dave', iss: 'cohort-test', scope: 'read', exp: inAnHour() })}` })
    expect(noScope.status).toBe(403)
    expect(noScope.body).toMatchObject({ code: 'FORBIDDEN', error: 'token lacks the scope "predict"' })
    // The refused requests never reached the model.
    for (const x of [3, 4, 5]) {
      expect(sleepyRuns(LOG).get(x), `x=${x} ran`).toBeUndefined()
    }
    // Probes need no credentials.
    expect((await fetch(`${secured}/v2/health/live`)).status).toBe(200)
  }, 60_000)

  it('answers 429 RATE_LIMITED with Retry-After past a client burst, per client: another key and another token subject still pass', async () => {
    // key-2 and the subject "erin" are fresh clients: a burst of 3 each.
    const auth = { authorization: 'Bearer key-2' }
    const burst = []
    for (let i = 0; i < 3; i++) {
      burst.push((await predict(secured, 10 + i, auth)).status)
    }
    expect(burst).toEqual([200, 200, 200])
    const limited = await predict(secured, 13, auth)
    expect(limited.status).toBe(429)
    expect(limited.body.code).toBe('RATE_LIMITED')
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(sleepyRuns(LOG).get(13), 'a limited request never runs').toBeUndefined()
    const erin = jwt({ sub: 'erin', iss: 'cohort-test', scope: 'predict', exp: inAnHour() })
    expect((await predict(secured, 14, { authorization: `Bearer ${erin}` })).status).toBe(200)
  }, 60_000)

  it('answers a CORS preflight for the allowed origin only, and error answers carry the CORS headers', async () => {
    const preflight = (origin: string) =>
      fetch(`${secured}/models/sleepy/predictions`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      })
    const ok = await preflight('https://app.example')
    expect(ok.status).toBe(204)
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example')
    expect(ok.headers.get('access-control-allow-methods')).toContain('POST')
    expect(ok.headers.get('access-control-allow-headers')).toContain('authorization')
    const other = await preflight('https://evil.example')
    expect(other.headers.get('access-control-allow-origin')).toBeNull()
    // A 401 a browser can read (CORS runs before authentication), with the headers it may read.
    const denied = await fetch(`${secured}/models/sleepy/predictions`, {
      method: 'POST',
      headers: { origin: 'https://app.example', 'content-type': 'application/json' },
      body: JSON.stringify({ input: { x: 20 } }),
    })
    expect(denied.status).toBe(401)
    expect(denied.headers.get('access-control-allow-origin')).toBe('https://app.example')
    expect(denied.headers.get('access-control-expose-headers')).toContain('retry-after')
    // Without --cors-origin there are no CORS headers at all.
    const off = await fetch(`${plain}/models/sleepy/predictions`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } })
    expect(off.headers.get('access-control-allow-origin')).toBeNull()
  }, 30_000)
})

describe('admission across processes (gateway process, worker process)', () => {
  it("refuses at once, by the worker's admission, a request that would finish after its deadline, while the requests ahead are served", async () => {
    // The worker learns t(b) (one item per batch, COST_MS each) from a few requests first.
    for (let i = 0; i < 6; i++) {
      expect((await predict(plain, 100 + i)).status).toBe(200)
    }
    const blockers = [200, 201, 202, 203].map((x) => predict(plain, x, { 'x-cohort-timeout-ms': '30000' }))
    // The signal that they are ahead: one batch running (SLEEPY_LOG) and the rest in the worker's queue.
    const end = Date.now() + 30_000
    for (;;) {
      const started = new Set(
        readSleepyLog(LOG)
          .flatMap((e) => (e.event === 'start' ? e.xs : []))
          .filter((x) => x >= 200 && x < 204),
      )
      const queued = parsePrometheus(await (await fetch(`${probes}/metrics`)).text()).get('cohort_queue_depth{model="sleepy"}') ?? 0
      if (started.size >= 1 && started.size + queued >= 4) break
      if (Date.now() > end) throw new Error(`blockers not held: ${started.size} started, ${queued} queued`)
      await new Promise((r) => setTimeout(r, 20))
    }
    // 3 queued and one running at COST_MS each: it cannot finish within 500 ms, on any machine.
    const short = await predict(plain, 300, { 'x-cohort-timeout-ms': '500' })
    // Refused by the worker's admission (its estimate), not by the gateway's front door: 503
    // OVERLOADED behind the queued work, or, when a loaded machine inflated the learned cost past
    // the whole deadline, 504 from the worker because it cannot finish even alone (or 400
    // DEADLINE_TOO_SHORT from the door, when a heartbeat already said so). Either way it never runs.
    if (short.status === 503) {
      expect(short.body.code).toBe('OVERLOADED')
      expect(short.headers.get('retry-after')).toMatch(/^[1-9]\d*$/)
      expect(short.body.error).toMatch(/^model "sleepy" cannot finish this item within its deadline \(estimated \d+ ms behind the queued work, \d+ ms left\)$/)
    } else if (short.status === 400) {
      expect(short.body.code).toBe('DEADLINE_TOO_SHORT')
      expect(short.body.error).toMatch(/^model "sleepy" needs about \d+ ms to run this item even alone on an idle worker, and its deadline left \d+ ms; it was not sent/)
    } else {
      expect(short.status, JSON.stringify(short.body)).toBe(504)
      expect(short.body.code).toBe('DEADLINE_EXCEEDED')
      expect(short.body.error).toMatch(/^model "sleepy" cannot finish this item within its deadline even alone \(estimated \d+ ms, \d+ ms left\); it was not run$/)
    }
    // One with room in its deadline is taken behind them.
    const patient = predict(plain, 301, { 'x-cohort-timeout-ms': '30000' })
    const served = await Promise.all([...blockers, patient])
    expect(served.map((r) => [r.status, r.body.output?.y])).toEqual([
      [200, 400],
      [200, 402],
      [200, 404],
      [200, 406],
      [200, 602],
    ])
    expect(sleepyRuns(LOG).get(300), 'the refused request never ran').toBeUndefined()
  }, 60_000)
})
