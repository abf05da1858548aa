// The worker's JobRunner over an in-memory JobQueue (the JetStream one is tested end to end in
// test/e2e/jobs-durable.test.ts): results stored once and acked after, terminal records skipped,
// refused jobs handed back, a job past maxDeliver recorded failed without running, pulls only with
// room, a cancel during the run wins over the late result, close() waits for the jobs taken, a
// redelivery while the result is still being stored joins the first instead of running again.
import { afterEach, describe, expect, it } from 'vitest'
import { type InferReply, type InferRequest } from '@cohort/protocol'
import { decodePrediction, encodePrediction, isTerminal, newPrediction, type Prediction } from '@cohort/predictions'
import { noopLogger } from '@cohort/observability'
import { MemoryJobQueue } from '@cohort/test-support'
import { deferDelay, JobRunner, type JobTarget, type WorkerJobOptions } from './jobs.ts'

const runners: JobRunner[] = []
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.close()))
})

/** A target whose submit() is the test's; records every request it got. */
function target(submit: (req: InferRequest) => Promise<InferReply>, room = () => 4): JobTarget & { got: InferRequest[] } {
  const got: InferRequest[] = []
  return {
    name: 'm',
    maxBatchSize: 4,
    room,
    got,
    submit: (req) => {
      got.push(req)
      return submit(req)
    },
  }
}

const ok = (req: InferRequest): Promise<InferReply> =>
  Promise.resolve({ v: 1, id: req.id, items: (req.items ?? []).map((i) => ({ y: 2 * (i as { x: number }).x })), timing: [{ computeMs: 3 }] } as InferReply)

/** Webhook calls as [event-ish status, id]: the runner's sender with a recording fetch. */
function hooks() {
  const calls: Prediction[] = []
  const fetch = ((_url: string, init?: RequestInit) => {
    if (typeof init?.body !== 'string') {
      return Promise.reject(new TypeError('a webhook body is JSON text'))
    }
    calls.push(JSON.parse(init.body) as Prediction)
    return Promise.resolve(new Response('', { status: 200 }))
  }) as typeof globalThis.fetch
  return { calls, fetch }
}

async function submitJob(q: MemoryJobQueue, id: string, input: unknown, webhook?: string): Promise<void> {
  await q.create(id, encodePrediction(newPrediction({ id, model: 'm', input, webhook })))
  await q.enqueue('m', id)
}

async function record(q: MemoryJobQueue, id: string): Promise<Prediction> {
  return decodePrediction((await q.get(id))!.value)
}

async function until(f: () => Promise<boolean> | boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!(await f())) {
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 5))
  }
}

function start(q: MemoryJobQueue, t: JobTarget, fetch?: typeof globalThis.fetch, o: Partial<WorkerJobOptions> = {}): JobRunner {
  const r = new JobRunner({ queue: q, ackWaitMs: 200, webhooks: { ...(fetch ? { fetch } : {}), initialDelayMs: 1 }, deferDelayMs: 5, deferMaxDelayMs: 20, ...o }, t, noopLogger)
  runners.push(r)
  r.start()
  return r
}

describe('JobRunner', () => {
  it('runs a job, stores its result once, acks it only after storing, and sends start, output, completed', async () => {
    const q = new MemoryJobQueue()
    const h = hooks()
    await submitJob(q, 'a', { x: 21 }, 'http://hook.invalid/')
    const r = start(q, target(ok), h.fetch)
    await until(async () => (await record(q, 'a')).status === 'succeeded')
    const p = await record(q, 'a')
    expect(p).toMatchObject({ status: 'succeeded', output: { y: 42 }, attempts: 1, error: null, metrics: { predict_time: 0.003 } })
    expect(p.started_at).not.toBeNull()
    await until(() => q.log.includes('ack a'))
    expect(q.log).toEqual(['enqueue a', 'deliver a 1', 'ack a'])
    await r.webhooks.idle()
    expect(h.calls.map((c) => c.status)).toEqual(['processing', 'succeeded', 'succeeded'])
  })

  it('acks without running a job whose record is already terminal (a redelivery of a finished or canceled job)', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'done', { x: 1 })
    const cur = (await q.get('done'))!
    await q.update('done', encodePrediction({ ...decodePrediction(cur.value), status: 'canceled' }), cur.revision)
    const t = target(ok)
    start(q, t)
    await until(() => q.log.includes('ack done'))
    expect(t.got).toEqual([])
    expect((await record(q, 'done')).status).toBe('canceled')
  })

  it('hands back a job the engine refused (OVERLOADED) without storing anything; a later delivery runs it', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'busy', { x: 2 })
    let refusals = 1
    const t = target((req) => (refusals-- > 0 ? Promise.resolve({ v: 1, id: req.id, error: { code: 'OVERLOADED', message: 'queue full' } } as InferReply) : ok(req)))
    start(q, t)
    await until(async () => (await record(q, 'busy')).status === 'succeeded')
    expect(q.log.slice(0, 3)).toEqual(['enqueue busy', 'deliver busy 1', 'nak busy'])
    expect(await record(q, 'busy')).toMatchObject({ output: { y: 4 }, attempts: 1, deferrals: 1 })
    expect(t.got).toHaveLength(2)
  })

  it('does not count refusals for load against maxDeliver: refused 6 times with a budget of 2, the job still runs, once', async () => {
    const q = new MemoryJobQueue({ maxDeliver: 2 })
    const h = hooks()
    await submitJob(q, 'flood', { x: 3 }, 'http://hook.invalid/')
    let refusals = 6
    const t = target((req) =>
      refusals-- > 0 ? Promise.resolve({ v: 1, id: req.id, error: { code: refusals % 2 ? 'OVERLOADED' : 'SHUTTING_DOWN', message: 'busy' } } as InferReply) : ok(req),
    )
    const r = start(q, t, h.fetch)
    await until(async () => isTerminal((await record(q, 'flood')).status), 8000)
    expect(await record(q, 'flood')).toMatchObject({ status: 'succeeded', output: { y: 6 }, attempts: 1, deferrals: 6 })
    expect(
      q.log.filter((l) => l.startsWith('deliver')),
      'seven deliveries, six of them refused',
    ).toHaveLength(7)
    expect(
      t.got.filter((g) => g.id === 'flood'),
      'submitted once per delivery, run (answered) once',
    ).toHaveLength(7)
    await until(() => q.pending().length === 0)
    await r.webhooks.idle()
    expect(
      h.calls.map((c) => c.status),
      'one start, one output, one completed',
    ).toEqual(['processing', 'succeeded', 'succeeded'])
  }, 10_000)

  it('still gives up after maxDeliver runs that failed, whatever the refusals between them', async () => {
    const q = new MemoryJobQueue({ maxDeliver: 2 })
    await submitJob(q, 'mixed', { x: 4 })
    // refused, failed (handed back), refused, failed: two runs, then the next delivery gives up.
    const script = ['OVERLOADED', 'throw', 'OVERLOADED', 'throw']
    const t = target((req) => {
      const s = script.shift()
      return s === 'throw' ? Promise.reject(new Error('worker trouble')) : s ? Promise.resolve({ v: 1, id: req.id, error: { code: s, message: 'busy' } } as InferReply) : ok(req)
    })
    start(q, t)
    await until(async () => isTerminal((await record(q, 'mixed')).status), 8000)
    expect(await record(q, 'mixed')).toMatchObject({ status: 'failed', code: 'PREDICTOR_FAILED', attempts: 2, deferrals: 2 })
    expect(t.got, 'four deliveries submitted; the fifth gave up without running').toHaveLength(4)
  }, 10_000)

  it('backs a refused job off: the wait doubles per refusal up to its bound, with a random half to all of it', () => {
    expect([1, 2, 3, 4, 5, 9].map((n) => deferDelay(n, 1000, 10_000, () => 1))).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000])
    expect(deferDelay(3, 1000, 10_000, () => 0)).toBe(2000)
    expect(
      deferDelay(1000, 1000, 10_000, () => 1),
      'no overflow',
    ).toBe(10_000)
  })

  it('records a job failed on the delivery past maxDeliver even when a delivery went to a dead worker', async () => {
    const q = new MemoryJobQueue({ maxDeliver: 2 })
    await submitJob(q, 'lost-ack', { x: 9 })
    // Delivery 1 runs and fails (handed back), delivery 2 goes to nobody, delivery 3 gives it up.
    const t = target(() => Promise.reject(new Error('worker trouble')))
    start(q, t)
    await until(() => t.got.length === 1)
    q.swallow = 1
    await until(async () => (await record(q, 'lost-ack')).status === 'failed', 8000)
    expect(t.got).toHaveLength(1)
    expect(q.log.filter((l) => l.startsWith('deliver'))).toEqual(['deliver lost-ack 1', 'deliver lost-ack 2', 'deliver lost-ack 3'])
  }, 10_000)

  it('records a job failed, without running it, on the delivery past maxDeliver', async () => {
    const q = new MemoryJobQueue({ maxDeliver: 2 })
    const h = hooks()
    await submitJob(q, 'poison', { x: 3 }, 'http://hook.invalid/')
    // Each run fails in a way that hands the job back (storing its result throws).
    const t = target(() => Promise.reject(new Error('worker trouble')))
    const r = start(q, t, h.fetch)
    await until(async () => (await record(q, 'poison')).status === 'failed', 8000)
    expect(t.got, 'runs: one per allowed delivery').toHaveLength(2)
    expect(await record(q, 'poison')).toMatchObject({
      status: 'failed',
      code: 'PREDICTOR_FAILED',
      output: null,
      attempts: 2,
      error: 'gave up after 2 deliveries: none finished (its worker stopped or failed every time)',
    })
    expect(q.log.filter((l) => l.startsWith('deliver'))).toEqual(['deliver poison 1', 'deliver poison 2', 'deliver poison 3'])
    await until(() => q.pending().length === 0)
    await r.webhooks.idle()
    expect(h.calls.map((c) => c.status)).toEqual(['processing', 'failed'])
  }, 10_000)

  it('pulls only while the engine has room', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'wait', { x: 4 })
    let room = 0
    const t = target(ok, () => room)
    start(q, t)
    await new Promise((r) => setTimeout(r, 100))
    expect(q.log).toEqual(['enqueue wait'])
    room = 1
    await until(async () => (await record(q, 'wait')).status === 'succeeded')
  })

  it('keeps a cancel made while the job runs: the late result is not stored, the job is acked', async () => {
    const q = new MemoryJobQueue()
    const h = hooks()
    await submitJob(q, 'c', { x: 5 }, 'http://hook.invalid/')
    let release!: () => void
    const t = target((req) => new Promise<void>((r) => (release = r)).then(() => ok(req)))
    const r = start(q, t, h.fetch)
    await until(() => t.got.length === 1)
    const cur = (await q.get('c'))!
    expect(decodePrediction(cur.value).status).toBe('processing')
    expect(await q.update('c', encodePrediction({ ...decodePrediction(cur.value), status: 'canceled' }), cur.revision)).toBe(true)
    release()
    await until(() => q.log.includes('ack c'))
    expect(await record(q, 'c')).toMatchObject({ status: 'canceled', output: null })
    await r.webhooks.idle()
    expect(
      h.calls.map((c) => c.status),
      'no output or completed from the runner',
    ).toEqual(['processing'])
  })

  it('retries its compare-and-set when the record moved on, and stores the result once', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'cas', { x: 6 })
    q.failUpdates = 2
    start(q, target(ok))
    await until(async () => (await record(q, 'cas')).status === 'succeeded')
    expect(await record(q, 'cas')).toMatchObject({ output: { y: 12 }, attempts: 1 })
  })

  it('gives up a compare-and-set after 20 tries ("kept changing") before the run: the job is handed back, then runs once', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'busy', { x: 4 })
    q.failUpdates = 20 // every try of the first start fails; the redelivery's start succeeds
    const t = target(ok)
    start(q, t)
    await until(async () => (await record(q, 'busy')).status === 'succeeded')
    expect(q.log.slice(0, 3)).toEqual(['enqueue busy', 'deliver busy 1', 'nak busy'])
    expect(t.got).toHaveLength(1)
    expect(await record(q, 'busy')).toMatchObject({ output: { y: 8 }, attempts: 2 })
  })

  it('does not run a job again when storing its result kept failing for a while: the result is retried, stored once', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'store', { x: 5 })
    const t = target(async (req) => {
      q.failUpdates = 45 // two rounds of 20 tries fail, and some of the third
      return ok(req)
    })
    // An ack wait well past the keep-alive (every 1 s): a loaded machine that stalls this process for
    // 200 ms would otherwise see a redelivery, which is the next test's case, not this one's.
    start(q, t, undefined, { ackWaitMs: 2000 })
    await until(async () => (await record(q, 'store')).status === 'succeeded')
    await until(() => q.log.includes('ack store'))
    expect(t.got).toHaveLength(1)
    expect(q.log).toEqual(['enqueue store', 'deliver store 1', 'ack store'])
    expect(await record(q, 'store')).toMatchObject({ output: { y: 10 }, attempts: 1 })
  })

  it('does not run a job again when it is redelivered while its result is still being stored (the ack wait passed)', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'slow-store', { x: 6 })
    const t = target(async (req) => {
      q.failUpdates = 20 // the first round of 20 tries fails; the retry waits 100 ms, past the 50 ms ack wait
      return ok(req)
    })
    // Redelivered during that wait, with the records writable again: its start would succeed.
    const r = new JobRunner({ queue: q, ackWaitMs: 50 }, t, noopLogger)
    runners.push(r)
    r.start()
    await until(async () => (await record(q, 'slow-store')).status === 'succeeded')
    await until(() => q.pending('m').length === 0)
    expect(q.log.filter((l) => l.startsWith('deliver slow-store')).length, q.log.join(', ')).toBeGreaterThanOrEqual(2) // it was redelivered
    expect(t.got).toHaveLength(1)
    expect(await record(q, 'slow-store')).toMatchObject({ output: { y: 12 }, attempts: 1 })
  })

  it('close() stops pulling and waits for the job taken to be stored; it is idempotent', async () => {
    const q = new MemoryJobQueue()
    await submitJob(q, 'slow', { x: 7 })
    const t = target((req) => new Promise((r) => setTimeout(r, 100)).then(() => ok(req)))
    const r = start(q, t)
    await until(() => t.got.length === 1)
    await Promise.all([r.close(), r.close()])
    expect(await record(q, 'slow')).toMatchObject({ status: 'succeeded', output: { y: 14 } })
    expect(q.log).toContain('ack slow')
    await submitJob(q, 'later', { x: 8 })
    await new Promise((res) => setTimeout(res, 100))
    expect(q.pending(), 'not pulled after close').toEqual(['later'])
    expect(t.got).toHaveLength(1)
  })
})
