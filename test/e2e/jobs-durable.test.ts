// Durable async predictions in NATS JetStream, across real processes: jobs batch with sync traffic,
// survive a gateway restart and a worker killed with SIGKILL mid-batch (redelivered after the ack
// wait, result recorded once), duplicate PUTs make one prediction, cancel, and no JetStream = 503.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SLEEPY_PREDICTOR, getJson, postJson, spawnCohort, startNatsServer, webhookReceiver, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const ACK_WAIT_MS = 1000
const procs: CliProcess[] = []

function worker(nats: string, id: string): CliProcess {
  const p = spawnCohort(
    ['worker', '--nats', nats, '--id', id, '--predictor', SLEEPY_PREDICTOR, '--max-batch-size', '16', '--job-ack-wait-ms', String(ACK_WAIT_MS)],
    { SLEEPY_MS: '20' },
  )
  procs.push(p)
  return p
}

async function gateway(nats: string): Promise<{ p: CliProcess; url: string }> {
  const p = spawnCohort(['gateway', '--nats', nats, '--port', '0', '--drain-ms', '0'])
  procs.push(p)
  const m = await p.waitFor(/gateway on (http:\/\/\S+)/)
  return { p, url: m[1]! }
}

async function until<T>(f: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f().catch(() => undefined)
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
  return { status: r.status, body: (await r.json()) as any }
}

const ASYNC = { prefer: 'respond-async' }
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

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: true })
    hooks = await webhookReceiver('/')
    w1 = worker(nats.url, 'w1')
    await w1.waitFor(/worker w1 serving/)
    gw = await gateway(nats.url)
  }, 60_000)

  afterAll(async () => {
    for (const p of procs) {
      await p.stop('SIGKILL').catch(() => undefined)
    }
    hooks?.server.close()
    await nats?.stop()
  })

  it('runs async jobs in the same batches as sync requests', async () => {
    const blocker = postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 0, sleepMs: 1500 } })
    await new Promise((r) => setTimeout(r, 300))
    const ids = ['mix-1', 'mix-2', 'mix-3']
    const accepted = await Promise.all(ids.map((id, i) => put(`${gw.url}/models/sleepy/predictions/${id}`, { input: { x: i + 1 } }, ASYNC)))
    expect(accepted.map((a) => a.status)).toEqual([202, 202, 202])
    expect(accepted[0]!.body).toMatchObject({ id: 'mix-1', status: 'starting', model: 'sleepy' })
    const sync = await Promise.all([11, 12, 13].map((x) => postJson(`${gw.url}/models/sleepy/predictions`, { input: { x } })))
    expect((await blocker).status).toBe(200)
    expect(sync.map((r) => r.status), JSON.stringify(sync.map((r) => r.body))).toEqual([200, 200, 200])
    const results = await Promise.all(ids.map((id) => finished(gw.url, id)))
    expect(results.map((r) => r.output.y)).toEqual([2, 4, 6])
    // 3 async jobs alone make a batch of at most 3: a larger one held sync requests too.
    const batches = [...results.map((r) => r.output.batch), ...sync.map((s) => s.body.output.batch)]
    expect(Math.max(...batches), JSON.stringify(batches)).toBeGreaterThanOrEqual(4)
  }, 60_000)

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
    await new Promise((r) => setTimeout(r, 300))
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
    await until(async () => hooks.got.some((h) => h.body.id === 'dup-1' && h.event === 'completed'))
    await new Promise((r) => setTimeout(r, 500))
    expect(hooks.got.filter((h) => h.body.id === 'dup-1').map((h) => h.event)).toEqual(['start', 'output', 'completed'])
  }, 60_000)

  it('cancels a queued job: it ends canceled, never runs, and the webhook says so', async () => {
    const blocker = postJson(`${gw.url}/models/sleepy/predictions`, { input: { x: 1, sleepMs: 1500 } })
    await new Promise((r) => setTimeout(r, 300))
    const r = await put(`${gw.url}/models/sleepy/predictions/cancel-1`, { input: { x: 9 }, webhook: hooks.url, webhook_events_filter: ['completed'] }, ASYNC)
    expect(r.status).toBe(202)
    const c = await postJson(`${gw.url}/predictions/cancel-1/cancel`, {})
    expect(c).toMatchObject({ status: 200, body: { id: 'cancel-1', status: 'canceled' } })
    await blocker
    await new Promise((res) => setTimeout(res, 500))
    expect((await getJson(`${gw.url}/predictions/cancel-1`)).body).toMatchObject({ status: 'canceled', output: null })
    await until(async () => hooks.got.some((h) => h.body.id === 'cancel-1'))
    expect(hooks.got.filter((h) => h.body.id === 'cancel-1').map((h) => [h.event, h.body.status])).toEqual([['completed', 'canceled']])
    expect((await getJson(`${gw.url}/predictions/unknown-id`)).status).toBe(404)
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
