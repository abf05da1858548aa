// Durable async predictions in NATS JetStream, across real processes: jobs batch with sync traffic,
// a result whose store failed (nats-server restarted mid-job) is stored later without a second run,
// survive a gateway restart and a worker killed with SIGKILL mid-batch (redelivered after the ack
// wait, result recorded once), duplicate PUTs make one prediction, cancel (queued and running), a
// poison job that kills its worker every time ends failed after --job-max-deliver runs, and no
// JetStream = 503. "The blocker is running" is the predictor's own signal (SLEEPY_LOG), not a sleep.
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { jobNames } from '@cohort/transport'
import {
  SLEEPY_PREDICTOR,
  getJson,
  postJson,
  readSleepyLog,
  sleepyLogPath,
  sleepyRuns,
  spawnCohort,
  startNatsServer,
  waitRunning,
  webhookReceiver,
  type CliProcess,
  type NatsServerHandle,
  ifStarted,
} from '@cohort/test-support'

const ACK_WAIT_MS = 1000
const procs: CliProcess[] = []
const LOG = sleepyLogPath()

function worker(nats: string, id: string, extra: string[] = [], env: Record<string, string> = {}): CliProcess {
  const p = spawnCohort(['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', '16', '--job-ack-wait-ms', String(ACK_WAIT_MS), ...extra], {
    SLEEPY_MS: '20',
    SLEEPY_LOG: LOG,
    ...env,
  })
  procs.push(p)
  return p
}

async function gateway(nats: string): Promise<{ p: CliProcess; url: string }> {
  const p = spawnCohort(['gateway', '--nats', nats, '--port', '0', '--drain-ms', '0'])
  procs.push(p)
  const m = await p.waitFor(/gateway on (http:\/\/\S+)/)
  return { p, url: m[1]! }
}

/** Polls `f` (sync or async; a throw or rejection counts as not yet) until it gives a value. */
async function until<T>(f: () => T | undefined | false | Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    let v: T | undefined | false
    try {
      v = await f()
    } catch {
      v = undefined
    }
    if (v !== undefined && v !== false) {
      return v
    }
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function put(url: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  return { status: r.status, body: await r.json() }
}

const ASYNC = { prefer: 'respond-async' }

/** True once the model's job consumer holds nothing: every job delivered was acked (handled to the end). */
async function jobsSettled(nc: NatsConnection, model = 'sleepy'): Promise<boolean> {
  const jsm = await jetstreamManager(nc)
  const ci = await jsm.consumers.info(jobNames().stream, `jobs-${model}`)
  return ci.num_ack_pending === 0 && ci.num_pending === 0
}
const finished = (url: string, id: string) =>
  until(async () => {
    const g = await getJson(`${url}/predictions/${id}`)
    return ['succeeded', 'failed', 'canceled'].includes(g.body.status) ? g.body : undefined
  })

describe('durable async predictions (JetStream)', () => {
  let nats: NatsServerHandle
  let gw: { p: CliProcess; url: string }
  let w1: CliProcess
  let hooks: Awaited<ReturnType<typeof webhookReceiver>>
  let nc: NatsConnection

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: true })
    nc = await connect({ servers: nats.url })
    hooks = await webhookReceiver('/')
    w1 = worker(nats.url, 'w1')
    await w1.waitFor(/worker w1 serving/)
    gw = await gateway(nats.url)
  }, 60_000)

  afterAll(async () => {
    for (const p of procs) {
      await p.stop('SIGKILL').catch(() => undefined)
    }
    ifStarted(hooks)?.server.close()
    await ifStarted(nc)?.close()
    await ifStarted(nats)?.stop()
  })

  it('runs async jobs in the same batches as sync requests', async () => {
    const blocker = postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 1000, sleepMs: 1500 } }, { 'x-cohort-timeout-ms': '30000' })
    await waitRunning(LOG, 1000)
    const ids = ['mix-1', 'mix-2', 'mix-3']
    const accepted = await Promise.all(ids.map((id, i) => put(`${gw.url}/models/sleepy/predictions/${id}`, { input: { x: i + 1 } }, ASYNC)))
    expect(accepted.map((a) => a.status)).toEqual([202, 202, 202])
    expect(accepted[0]!.body).toMatchObject({ id: 'mix-1', status: 'starting', model: 'sleepy' })
    const sync = await Promise.all([11, 12, 13].map((x) => postJson(`${gw.url}/models/sleepy/predictions`, { input: { x } })))
    expect((await blocker).status).toBe(200)
    expect(
      sync.map((r) => r.status),
      JSON.stringify(sync.map((r) => r.body)),
    ).toEqual([200, 200, 200])
    const results = await Promise.all(ids.map((id) => finished(gw.url, id)))
    expect(results.map((r) => r.output.y)).toEqual([2, 4, 6])
    // 3 async jobs alone make a batch of at most 3: a larger one held sync requests too.
    const batches = [...results.map((r) => r.output.batch), ...sync.map((s) => s.body.output.batch)]
    expect(Math.max(...batches), JSON.stringify(batches)).toBeGreaterThanOrEqual(4)
  }, 60_000)

  it('keeps records and queued jobs for a bounded time and size (docs/reliability.md#retention-of-async-predictions)', async () => {
    const jsm = await jetstreamManager(nc)
    const names = jobNames()
    const [bucket, stream] = await Promise.all([jsm.streams.info(`KV_${names.bucket}`), jsm.streams.info(names.stream)])
    const weekNs = 7 * 24 * 3600 * 1e9
    expect(bucket.config).toMatchObject({ max_age: weekNs, max_bytes: 1024 ** 3, max_msgs_per_subject: 1 })
    expect(stream.config).toMatchObject({ max_age: weekNs, max_bytes: 1024 ** 3 })
  })

  it('answers GET after a gateway restart (the result lives in JetStream KV)', async () => {
    const r = await postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 21, sleepMs: 800 } }, ASYNC)
    expect(r.status).toBe(202)
    await gw.p.stop('SIGKILL')
    gw = await gateway(nats.url)
    const done = await finished(gw.url, r.body.id)
    expect(done).toMatchObject({ id: r.body.id, status: 'succeeded', output: { y: 42 } })
  }, 60_000)

  it('redelivers the jobs of a worker killed mid-batch and records each result once', async () => {
    const ids = ['kill-1', 'kill-2', 'kill-3', 'kill-4']
    for (const [i, id] of ids.entries()) {
      const r = await put(`${gw.url}/models/sleepy/predictions/${id}`, { input: { x: 100 + i, sleepMs: 2500 }, webhook: hooks.url, webhook_events_filter: ['completed'] }, ASYNC)
      expect(r.status).toBe(202)
    }
    // Every job was pulled by w1 (processing) and the first batch is running: kill it hard.
    await until(async () => {
      const all = await Promise.all(ids.map((id) => getJson(`${gw.url}/predictions/${id}`)))
      return all.every((g) => g.body.status === 'processing')
    })
    await waitRunning(LOG, 100)
    await w1.stop('SIGKILL')
    const w2 = worker(nats.url, 'w2')
    await w2.waitFor(/worker w2 serving/)
    const results = await Promise.all(ids.map((id) => finished(gw.url, id)))
    results.forEach((r, i) => {
      expect(r).toMatchObject({ status: 'succeeded', output: { y: 2 * (100 + i) } })
      expect(r.attempts, r.id).toBeGreaterThanOrEqual(2)
    })
    await new Promise((r) => setTimeout(r, ACK_WAIT_MS + 1000))
    for (const id of ids) {
      const completed = hooks.got.filter((h) => h.body.id === id && h.event === 'completed')
      expect(completed, id).toHaveLength(1)
    }
  }, 90_000)

  it('makes one prediction of a duplicated PUT, and one webhook per event', async () => {
    const body = { input: { x: 7 }, webhook: hooks.url }
    const [a, b] = await Promise.all([put(`${gw.url}/models/sleepy/predictions/dup-1`, body, ASYNC), put(`${gw.url}/models/sleepy/predictions/dup-1`, body, ASYNC)])
    expect([a.status, b.status]).toEqual([202, 202])
    expect(a.body.created_at).toBe(b.body.created_at)
    const sync = await put(`${gw.url}/models/sleepy/predictions/dup-1`, body)
    expect(sync).toMatchObject({ status: 200, body: { status: 'succeeded', output: { y: 14 }, attempts: 1 } })
    await until(() => hooks.got.some((h) => h.body.id === 'dup-1' && h.event === 'completed'))
    await new Promise((r) => setTimeout(r, 500))
    expect(hooks.got.filter((h) => h.body.id === 'dup-1').map((h) => h.event)).toEqual(['start', 'output', 'completed'])
  }, 60_000)

  it('cancels a queued job: it ends canceled, never runs, and the webhook says so', async () => {
    const blocker = postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 1001, sleepMs: 1500 } }, { 'x-cohort-timeout-ms': '30000' })
    await waitRunning(LOG, 1001)
    const r = await put(`${gw.url}/models/sleepy/predictions/cancel-1`, { input: { x: 9 }, webhook: hooks.url, webhook_events_filter: ['completed'] }, ASYNC)
    expect(r.status).toBe(202)
    const c = await postJson(`${gw.url}/predictions/cancel-1/cancel`, {})
    expect(c).toMatchObject({ status: 200, body: { id: 'cancel-1', status: 'canceled' } })
    await blocker
    // Every job pulled was handled to its ack: had the canceled one been run, it would be in the log.
    await until(() => jobsSettled(nc))
    expect(sleepyRuns(LOG).get(9), 'the canceled job ran').toBeUndefined()
    expect((await getJson(`${gw.url}/predictions/cancel-1`)).body).toMatchObject({ status: 'canceled', output: null })
    await until(() => hooks.got.some((h) => h.body.id === 'cancel-1'))
    expect(hooks.got.filter((h) => h.body.id === 'cancel-1').map((h) => [h.event, h.body.status])).toEqual([['completed', 'canceled']])
    expect((await getJson(`${gw.url}/predictions/unknown-id`)).status).toBe(404)
  }, 60_000)

  it('cancels a running job: it ends canceled, its late result is not stored, one completed webhook', async () => {
    const r = await put(`${gw.url}/models/sleepy/predictions/cancel-run`, { input: { x: 301, sleepMs: 1500 }, webhook: hooks.url, webhook_events_filter: ['completed'] }, ASYNC)
    expect(r.status).toBe(202)
    await waitRunning(LOG, 301)
    expect((await getJson(`${gw.url}/predictions/cancel-run`)).body.status).toBe('processing')
    const c = await postJson(`${gw.url}/predictions/cancel-run/cancel`, {})
    expect(c).toMatchObject({ status: 200, body: { id: 'cancel-run', status: 'canceled' } })
    // The batch runs to its end (a running predict() is not interrupted), then the worker acks the job
    // without storing the result over the cancel.
    await until(() => readSleepyLog(LOG).some((e) => e.event === 'end' && e.xs.includes(301)))
    await until(() => jobsSettled(nc))
    expect((await getJson(`${gw.url}/predictions/cancel-run`)).body).toMatchObject({ status: 'canceled', output: null })
    expect(sleepyRuns(LOG).get(301), 'ran once, not redelivered').toBe(1)
    await until(() => hooks.got.some((h) => h.body.id === 'cancel-run'))
    expect(hooks.got.filter((h) => h.body.id === 'cancel-run').map((h) => [h.event, h.body.status])).toEqual([['completed', 'canceled']])
  }, 60_000)
})

describe('a poison job (its worker dies every time it runs it)', () => {
  it('is delivered at most --job-max-deliver times, then ends failed with a clear error; the next job is served', async () => {
    const nats = await startNatsServer({ jetstream: true })
    const hooks = await webhookReceiver('/')
    const started = procs.length
    const POISON = 666
    const poisonWorker = (id: string) => worker(nats.url, id, ['--job-max-deliver', '2'], { SLEEPY_CRASH_X: String(POISON) })
    try {
      let w = poisonWorker('poison-1')
      await w.waitFor(/worker poison-1 serving/)
      const gw = await gateway(nats.url)
      const r = await put(`${gw.url}/models/sleepy/predictions/poison`, { input: { x: POISON }, webhook: hooks.url, webhook_events_filter: ['completed'] }, ASYNC)
      expect(r.status).toBe(202)
      // Each run kills its worker; a new one is started until the job is recorded. A delivery can
      // also go to the pull request a dead worker left behind, so 2 deliveries are 1 or 2 runs.
      let workers = 1
      let done: { error?: unknown } | undefined
      for (;;) {
        let last: unknown
        const exited = await until(async () => {
          if (w.proc.exitCode !== null || w.proc.signalCode !== null) return 'exited'
          const g = await getJson(`${gw.url}/predictions/poison`)
          last = g.body
          return ['succeeded', 'failed', 'canceled'].includes(g.body.status) ? (done = g.body) && 'recorded' : undefined
        }, 90_000).catch((e: unknown) => {
          throw new Error(`${e instanceof Error ? e.message : String(e)}: record ${JSON.stringify(last)}; worker ${workers} output:\n${w.output()}`)
        })
        if (exited === 'recorded') break
        expect(workers, 'workers started before the job was given up').toBeLessThan(4)
        workers++
        w = poisonWorker(`poison-${workers}`)
      }
      expect(done).toMatchObject({ status: 'failed', output: null, code: 'PREDICTOR_FAILED', attempts: 2 })
      expect(done?.error).toBe('gave up after 2 deliveries: none finished (its worker stopped or failed every time)')
      const runs = sleepyRuns(LOG).get(POISON) ?? 0
      expect(runs, 'runs of the poison job').toBeGreaterThanOrEqual(1)
      expect(runs, 'runs of the poison job').toBeLessThanOrEqual(2)
      expect(w.proc.exitCode, 'the worker that gave up is alive').toBeNull()
      expect(w.proc.signalCode).toBeNull()
      await until(() => hooks.got.some((h) => h.body.id === 'poison'))
      expect(hooks.got.filter((h) => h.body.id === 'poison').map((h) => [h.event, h.body.status])).toEqual([['completed', 'failed']])
      const next = await put(`${gw.url}/models/sleepy/predictions/after-poison`, { input: { x: 5 } })
      expect(next).toMatchObject({ status: 200, body: { status: 'succeeded', output: { y: 10 } } })
    } finally {
      for (const p of procs.splice(started)) {
        await p.stop('SIGKILL').catch(() => undefined)
      }
      hooks.server.close()
      await nats.stop()
    }
  }, 240_000)
})

describe('retention flags', () => {
  it('--job-record-ttl-ms and --job-record-max-bytes size the records bucket and the jobs stream', async () => {
    const nats = await startNatsServer({ jetstream: true })
    const started = procs.length
    const nc = await connect({ servers: nats.url })
    const retention = ['--job-record-ttl-ms', '3600000', '--job-record-max-bytes', '1048576']
    try {
      const w = worker(nats.url, 'ret', retention)
      await w.waitFor(/worker ret serving/)
      const p = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', ...retention])
      procs.push(p)
      const url = (await p.waitFor(/gateway on (http:\/\/\S+)/))[1]!
      expect((await put(`${url}/models/sleepy/predictions/ret-1`, { input: { x: 1 } }, ASYNC)).status).toBe(202)
      const jsm = await jetstreamManager(nc)
      const names = jobNames()
      const [bucket, stream] = await Promise.all([jsm.streams.info(`KV_${names.bucket}`), jsm.streams.info(names.stream)])
      expect(bucket.config).toMatchObject({ max_age: 3600 * 1e9, max_bytes: 1048576 })
      expect(stream.config).toMatchObject({ max_age: 3600 * 1e9, max_bytes: 1048576 })
    } finally {
      for (const p of procs.splice(started)) {
        await p.stop('SIGKILL').catch(() => undefined)
      }
      await nc.close()
      await nats.stop()
    }
  }, 60_000)
})

describe('async predictions without JetStream', () => {
  it('answers async requests 503 JOBS_UNAVAILABLE while sync predictions work', async () => {
    const nats = await startNatsServer({ jetstream: false })
    const started = procs.length
    try {
      const w = worker(nats.url, 'nojs')
      await w.waitFor(/worker nojs serving/)
      const gw = await gateway(nats.url)
      const sync = await postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 2 } })
      expect(sync).toMatchObject({ status: 200, body: { status: 'succeeded', output: { y: 4 } } })
      const a = await postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 2 } }, ASYNC)
      expect(a.status).toBe(503)
      expect(a.body.code).toBe('JOBS_UNAVAILABLE')
      expect(a.headers.get('retry-after')).toBe('5')
      expect((await getJson(`${gw.url}/predictions/some-id`)).body.code).toBe('JOBS_UNAVAILABLE')
    } finally {
      // The first describe's afterAll has already run: stop this test's worker and gateway here.
      for (const p of procs.splice(started)) {
        await p.stop('SIGKILL').catch(() => undefined)
      }
      await nats.stop()
    }
  }, 60_000)
})

describe('a job whose result cannot be stored after it ran (JetStream restarted mid-job)', () => {
  it('is not run again when redelivered: it ran once and its result is stored once the server is back', async () => {
    const nats = await startNatsServer({ jetstream: true })
    const started = procs.length
    const X = 501
    let nc: NatsConnection | undefined
    try {
      const w = worker(nats.url, 'store-1')
      await w.waitFor(/worker store-1 serving/)
      const gw = await gateway(nats.url)
      const r = await put(`${gw.url}/models/sleepy/predictions/store-fail`, { input: { x: X, sleepMs: 1500 } }, ASYNC)
      expect(r.status).toBe(202)
      await waitRunning(LOG, X)
      // The server goes away while the job runs and stays away past the run's end and the ack wait
      // (its redelivery is due when it is back); the worker's store of the result fails meanwhile.
      await nats.restart(3 * ACK_WAIT_MS)
      const done = await finished(gw.url, 'store-fail')
      expect(done).toMatchObject({ status: 'succeeded', output: { y: 2 * X } })
      nc = await connect({ servers: nats.url })
      await until(() => jobsSettled(nc!))
      // Past another ack wait: a redelivery that ran it again would be in the log by now.
      await new Promise((r) => setTimeout(r, 2 * ACK_WAIT_MS))
      expect(sleepyRuns(LOG).get(X), 'runs of the job').toBe(1)
      expect(w.output()).toMatch(/not stored yet; retrying/)
      expect((await getJson(`${gw.url}/predictions/store-fail`)).body).toMatchObject({ status: 'succeeded', attempts: 1 })
    } finally {
      for (const p of procs.splice(started)) {
        await p.stop('SIGKILL').catch(() => undefined)
      }
      await nc?.close()
      await nats.stop()
    }
  }, 120_000)
})
