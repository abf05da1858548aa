// DurableJobs (async predictions in JetStream, the gateway's side) over an in-memory JobQueue; the
// JetStream one end to end is test/e2e/jobs-durable.test.ts. Idempotent submit, re-enqueue of a
// record that never started, cancel (compare-and-set, the notice to the workers, its webhook),
// and wait.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeCancel, subjects } from '@cohort/protocol'
import { decodePrediction, encodePrediction, newPrediction, type Prediction } from '@cohort/predictions'
import { InProcessTransport } from '@cohort/transport'
import { MemoryJobQueue } from '@cohort/test-support'
import { createGatewayCore } from '../core.ts'
import { DurableJobs } from './durable.ts'

const S = subjects()
const open: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.close()
  }
})

function setup() {
  const q = new MemoryJobQueue()
  const transport = new InProcessTransport()
  const calls: Prediction[] = []
  const fetch = ((_url: string, init?: RequestInit) => {
    if (typeof init?.body !== 'string') {
      return Promise.reject(new TypeError('a webhook body is JSON text'))
    }
    calls.push(JSON.parse(init.body) as Prediction)
    return Promise.resolve(new Response('', { status: 200 }))
  }) as typeof globalThis.fetch
  const jobs = new DurableJobs(q, createGatewayCore({ transport, metaTimeoutMs: 1000, workerLoss: false }).upstream, { webhooks: { fetch, initialDelayMs: 1 } })
  open.push(jobs, transport)
  // What the workers of model `m` hear on the cancel subject.
  const cancels: string[] = []
  const sub = transport.subscribe(S.cancel('m'))
  void (async () => {
    for await (const m of sub) {
      cancels.push(decodeCancel(m.data).id)
    }
  })()
  return { q, jobs, calls, cancels }
}

const pred = (id: string, webhook?: string) => newPrediction({ id, model: 'm', input: { x: 1 }, webhook, webhookEventsFilter: ['completed'] })

async function setStatus(q: MemoryJobQueue, id: string, status: Prediction['status']): Promise<void> {
  const cur = (await q.get(id))!
  expect(await q.update(id, encodePrediction({ ...decodePrediction(cur.value), status }), cur.revision)).toBe(true)
}

describe('DurableJobs', () => {
  it('stores and enqueues a new prediction; a second submit of the id answers the stored one', async () => {
    const { q, jobs } = setup()
    const a = await jobs.submit(pred('p1'))
    expect(a.created).toBe(true)
    expect(a.prediction).toMatchObject({ id: 'p1', status: 'starting', model: 'm' })
    const b = await jobs.submit({ ...pred('p1'), input: { x: 999 } })
    expect(b.created).toBe(false)
    expect(b.prediction.input).toEqual({ x: 1 })
    expect(b.prediction.created_at).toBe(a.prediction.created_at)
    // Still `starting`: enqueued again (an earlier gateway may have died before enqueueing), and the
    // stream keeps one job per id.
    expect(q.log).toEqual(['enqueue p1', 'enqueue p1'])
    expect(q.pending()).toEqual(['p1'])
  })

  it('does not enqueue again once the prediction started', async () => {
    const { q, jobs } = setup()
    await jobs.submit(pred('p2'))
    await setStatus(q, 'p2', 'processing')
    const again = await jobs.submit(pred('p2'))
    expect(again).toMatchObject({ created: false, prediction: { status: 'processing' } })
    expect(q.log).toEqual(['enqueue p2'])
  })

  it('cancels: the record ends canceled, the workers are told, the completed webhook is sent once', async () => {
    const { q, jobs, calls, cancels } = setup()
    await jobs.submit(pred('c1', 'http://hook.invalid/'))
    const c = await jobs.cancel('c1')
    expect(c).toMatchObject({ id: 'c1', status: 'canceled' })
    expect(c!.completed_at).not.toBeNull()
    expect((await jobs.get('c1'))!.status).toBe('canceled')
    await new Promise((r) => setTimeout(r, 20))
    expect(cancels).toEqual(['c1'])
    await jobs.webhooks.idle()
    expect(calls.map((p) => [p.id, p.status])).toEqual([['c1', 'canceled']])
    // Cancelling again (or a finished one) answers the record as it is, and tells nobody.
    expect(await jobs.cancel('c1')).toMatchObject({ status: 'canceled' })
    await setStatus(q, (await jobs.submit(pred('done'))).prediction.id, 'succeeded')
    expect(await jobs.cancel('done')).toMatchObject({ status: 'succeeded' })
    await new Promise((r) => setTimeout(r, 20))
    await jobs.webhooks.idle()
    expect(cancels).toEqual(['c1'])
    expect(calls).toHaveLength(1)
    expect(await jobs.cancel('unknown')).toBeUndefined()
  })

  it('cancel retries when the record moves on meanwhile (a worker started it), and still cancels', async () => {
    const { q, jobs } = setup()
    await jobs.submit(pred('race'))
    q.failUpdates = 3
    expect(await jobs.cancel('race')).toMatchObject({ status: 'canceled' })
    expect((await jobs.get('race'))!.status).toBe('canceled')
  })

  it('wait answers once the prediction is terminal, or as it is at the timeout', async () => {
    const { q, jobs } = setup()
    await jobs.submit(pred('w1'))
    const t0 = Date.now()
    expect((await jobs.wait('w1', 100))!.status).toBe('starting')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(95)
    const waiting = jobs.wait('w1', 10_000)
    await setStatus(q, 'w1', 'succeeded')
    expect((await waiting)!.status).toBe('succeeded')
    expect(await jobs.wait('nope', 1000)).toBeUndefined()
    expect(await jobs.get('nope')).toBeUndefined()
  })
})
