// The NATS services protocol (ADR-32) over real NATS with two worker processes: what
// `nats micro ls / info / stats` do, done by hand with requestMany, plus the gateway's readiness
// and GET /v2/workers built on it.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import type { ServiceInfoResponse, ServicePingResponse, ServiceStatsResponse } from '@cohort/protocol'
import {
  SLEEPY_PREDICTOR,
  getJson,
  postJson,
  spawnCohort,
  startNatsServer,
  writeModelFixtures,
  type CliProcess,
  type NatsServerHandle,
  ifStarted,
  allStarted,
} from '@cohort/test-support'

const EMPTY = new Uint8Array(0)
const dec = new TextDecoder()

describe('NATS services protocol ($SRV) with 2 worker processes', () => {
  let nats: NatsServerHandle
  let nc: NatsConnection
  let gw: CliProcess
  let base: string
  const workers: CliProcess[] = []

  beforeAll(async () => {
    nats = await startNatsServer()
    const fx = writeModelFixtures()
    for (const id of ['w1', 'w2']) {
      const w = spawnCohort(['worker', '--nats', nats.url, '--id', id, '--threads', '1', '--model', `demo=${fx.demo}`, '--predictor', SLEEPY_PREDICTOR], { SLEEPY_MS: '5' })
      workers.push(w)
    }
    await Promise.all(workers.map((w) => w.waitFor(/serving/, 60_000)))
    gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
    const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
    base = `http://127.0.0.1:${port}`
    nc = await connect({ servers: nats.url })
  })

  afterAll(async () => {
    await ifStarted(nc)?.close()
    await Promise.all(allStarted(...workers, gw).map((p) => p.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  /**
   * The answers, parsed and sorted by id (what `nats micro` gathers): the first `expected` of them
   * (waiting up to 10 s, so a loaded machine cannot make it flaky), or with no `expected`, all that
   * arrive within 1 s.
   */
  async function gather<T extends { id: string }>(subject: string, expected?: number): Promise<T[]> {
    const opts = expected ? { strategy: 'count' as const, maxMessages: expected, maxWait: 10_000 } : { maxWait: 1_000 }
    const out: T[] = []
    for await (const m of await nc.requestMany(subject, EMPTY, opts)) {
      if (m.data.byteLength > 0) {
        out.push(JSON.parse(dec.decode(m.data)) as T)
      }
    }
    return out.sort((a, b) => a.id.localeCompare(b.id))
  }

  it('answers $SRV.PING from both workers (nats micro ping / ls)', async () => {
    const pings = await gather<ServicePingResponse>('$SRV.PING', 2)
    expect(pings.map((p) => [p.type, p.name, p.id])).toEqual([
      ['io.nats.micro.v1.ping_response', 'cohort-worker', 'w1'],
      ['io.nats.micro.v1.ping_response', 'cohort-worker', 'w2'],
    ])
    for (const p of pings) {
      expect(p.version).toMatch(/^\d+\.\d+\.\d+$/)
      expect(p.metadata).toMatchObject({ models: 'demo,sleepy', state: 'serving' })
    }
    expect((await gather<ServicePingResponse>('$SRV.PING.cohort-worker', 2)).map((p) => p.id)).toEqual(['w1', 'w2'])
    expect((await gather<ServicePingResponse>('$SRV.PING.cohort-worker.w2', 1)).map((p) => p.id)).toEqual(['w2'])
  })

  it('lists one endpoint per model in $SRV.INFO.cohort-worker (nats micro info)', async () => {
    const infos = await gather<ServiceInfoResponse>('$SRV.INFO.cohort-worker', 2)
    expect(infos.map((i) => i.id)).toEqual(['w1', 'w2'])
    for (const info of infos) {
      expect(info).toMatchObject({ type: 'io.nats.micro.v1.info_response', name: 'cohort-worker', description: expect.any(String) })
      expect(info.endpoints).toEqual([
        {
          name: 'demo',
          subject: 'cohort.infer.demo',
          queue_group: 'cohort.q.demo',
          metadata: expect.objectContaining({ model: 'demo', max_batch_size: '256', policy: 'eager', ready: 'true', kind: 'onnx' }),
        },
        {
          name: 'sleepy',
          subject: 'cohort.infer.sleepy',
          queue_group: 'cohort.q.sleepy',
          metadata: expect.objectContaining({ model: 'sleepy', max_batch_size: '64', ready: 'true', kind: 'predictor' }),
        },
      ])
    }
  })

  it('counts the requests sent in $SRV.STATS.cohort-worker.<id> (nats micro stats)', async () => {
    const before = await Promise.all(['w1', 'w2'].map((id) => gather<ServiceStatsResponse>(`$SRV.STATS.cohort-worker.${id}`, 1)))
    const sleepyRequests = (st: ServiceStatsResponse[][]) => st.flat().reduce((a, s) => a + s.endpoints.find((e) => e.name === 'sleepy')!.num_requests, 0)
    const sent = 12
    const replies = await Promise.all(Array.from({ length: sent }, (_, i) => postJson(`${base}/models/sleepy/predictions`, { input: { x: i, fail: i === 5 } })))
    expect(replies.map((r) => r.status).filter((s) => s === 200)).toHaveLength(sent - 1)
    const after = await Promise.all(['w1', 'w2'].map((id) => gather<ServiceStatsResponse>(`$SRV.STATS.cohort-worker.${id}`, 1)))
    expect(after.map((a) => a.map((s) => s.id))).toEqual([['w1'], ['w2']])
    expect(sleepyRequests(after) - sleepyRequests(before)).toBe(sent)
    const endpoints = after.flat().map((s) => s.endpoints.find((e) => e.name === 'sleepy')!)
    expect(endpoints.reduce((a, e) => a + e.num_errors, 0)).toBe(1)
    expect(endpoints.map((e) => e.last_error).filter(Boolean)).toEqual([expect.stringMatching(/x=5 failed on purpose/)])
    for (const [k, s] of after.flat().entries()) {
      expect(s.type).toBe('io.nats.micro.v1.stats_response')
      expect(Number.isNaN(Date.parse(s.started))).toBe(false)
      const e = s.endpoints.find((x) => x.name === 'sleepy')!
      if (e.num_requests > 0) {
        // At least the predictor's 5 ms sleep, in ns.
        expect(e.average_processing_time, `worker ${k}`).toBeGreaterThanOrEqual(4_000_000)
        expect(e.data.batches).toBeGreaterThan(0)
        expect(e.data.mean_batch_size).toBeGreaterThanOrEqual(1)
      }
      // The gateway's metadata lookups are not inference requests.
      expect(s.endpoints.find((x) => x.name === 'demo')!.num_requests).toBe(0)
    }
  })

  // The gateway gathers $SRV answers for 250 ms: on a loaded machine a worker can answer late, so
  // these poll until the answer is complete.
  const eventually = (fn: () => Promise<void>) => vi.waitFor(fn, { timeout: 10_000, interval: 100 })

  it('builds the gateway readiness and GET /v2/workers from $SRV', async () => {
    await eventually(async () => expect(await getJson(`${base}/v2/health/ready`)).toEqual({ status: 200, body: { ready: true, models: 2, workers: 2 } }))
    await eventually(async () => {
      const r = await getJson(`${base}/v2/workers`)
      expect(r.status).toBe(200)
      expect(r.body.workers.map((w: { id: string; models: string[]; state: string }) => [w.id, w.models, w.state])).toEqual([
        ['w1', ['demo', 'sleepy'], 'serving'],
        ['w2', ['demo', 'sleepy'], 'serving'],
      ])
      expect(r.body.workers.reduce((a: number, w: { stats: { requests: number } }) => a + w.stats.requests, 0)).toBe(12)
    })
  })

  it('stops answering when a worker has drained (SIGTERM)', async () => {
    expect(await workers[1]!.stop('SIGTERM')).toBe(0)
    expect((await gather<ServicePingResponse>('$SRV.PING')).map((p) => p.id)).toEqual(['w1'])
    await eventually(async () => expect(await getJson(`${base}/v2/health/ready`)).toEqual({ status: 200, body: { ready: true, models: 2, workers: 1 } }))
  })
})
