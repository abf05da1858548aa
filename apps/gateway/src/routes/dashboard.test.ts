// The live dashboard: its data model (snapshots, rates, percentiles from histogram deltas) and its
// routes (background sampling, authentication), over `app.request` with an InProcessTransport (no sockets).
import { afterEach, describe, expect, it } from 'vitest'
import { Hono } from 'hono'
import { Registry, gatewayMetrics, workerMetrics } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '../app.ts'
import { createGatewayCore } from '../core.ts'
import type { WorkerSummary } from '../discovery.ts'
import { registerDashboard } from './dashboard.ts'
import { DashboardHistory, mergeWorkers, snapshotFromFamilies, workerFromDiscovery, type DashboardData } from './dashboard-data.ts'

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) {
    await c()
  }
})

/** A registry with the gateway's and the worker's metrics (embedded mode). */
function metrics() {
  const registry = new Registry()
  return { registry, gw: gatewayMetrics(registry), wk: workerMetrics(registry) }
}

describe('dashboard data model', () => {
  it('reads per-model snapshots from the registry (structured, no text round trip)', () => {
    const { registry, gw, wk } = metrics()
    gw.requests.inc({ model: 'm', code: 'OK' }, 3)
    gw.requests.inc({ model: 'm', code: 'DEADLINE_EXCEEDED' })
    gw.duration.observe({ model: 'm' }, 0.003)
    wk.batchSize.observe({ model: 'm' }, 3)
    wk.batchSize.observe({ model: 'm' }, 5)
    wk.dispatch.inc({ model: 'm', reason: 'idle' })
    wk.dispatch.inc({ model: 'm', reason: 'full' })
    wk.shed.inc({ model: 'm', reason: 'deadline' })
    wk.queueDepth.set({ model: 'm' }, 7)
    gw.requests.inc({ model: 'other', code: 'OK' })
    gw.requests.inc({ model: 'typo', code: 'MODEL_NOT_FOUND' })
    const s = snapshotFromFamilies(registry.collect(), 1000)
    expect(s.workerMetrics).toBe(true)
    const m = s.models.get('m')!
    expect(m.requests).toEqual({ OK: 3, DEADLINE_EXCEEDED: 1 })
    expect(m.batches).toBe(2)
    expect(m.batchSizeSum).toBe(8)
    expect(m.dispatch).toEqual({ idle: 1, full: 1 })
    expect(m.shed).toEqual({ deadline: 1 })
    expect(m.queueDepth).toBe(7)
    expect(m.duration?.at(-1)).toEqual({ le: Infinity, count: 1 })
    expect(m.batchSize?.find((b) => b.le === 4)?.count).toBe(1)
    expect(s.models.get('other')?.requests).toEqual({ OK: 1 })
    // Names nobody serves that only ever got 404s are not listed as models.
    const h = new DashboardHistory()
    h.add(s)
    expect(h.view([], 'x').models.map((x) => x.name)).toEqual(['m', 'other'])
    // Gateway metrics only (distributed): queue depth and batches come from the workers.
    const g = new Registry()
    gatewayMetrics(g).requests.inc({ model: 'm', code: 'OK' })
    const w = { id: 'w1', models: [{ name: 'm', ready: true, queued: 4, maxBatchSize: 8, batches: 10, meanBatchSize: 2.5, requests: 25 }] }
    const d = snapshotFromFamilies(g.collect(), 1000, [w, { ...w, id: 'w2' }])
    expect(d.workerMetrics).toBe(false)
    expect(d.models.get('m')).toMatchObject({ queueDepth: 8, batches: 20, batchSizeSum: 50 })
    expect(d.workers.size).toBe(2)
  })

  it('computes rates and p50/p99 from the histogram deltas between samples', () => {
    const { registry, gw, wk } = metrics()
    const h = new DashboardHistory({ minIntervalMs: 500, currentMs: 1000 })
    gw.duration.observe({ model: 'm' }, 5) // before the first sample: not in the rates
    h.add(snapshotFromFamilies(registry.collect(), 0))
    for (let i = 0; i < 90; i++) {
      gw.requests.inc({ model: 'm', code: 'OK' })
      gw.duration.observe({ model: 'm' }, 0.004)
    }
    for (let i = 0; i < 10; i++) {
      gw.requests.inc({ model: 'm', code: 'UNAVAILABLE' })
      gw.duration.observe({ model: 'm' }, 0.2)
    }
    for (let i = 0; i < 25; i++) {
      wk.batchSize.observe({ model: 'm' }, 4)
      wk.dispatch.inc({ model: 'm', reason: i < 5 ? 'idle' : 'full' })
    }
    h.add(snapshotFromFamilies(registry.collect(), 1000))
    h.add(snapshotFromFamilies(registry.collect(), 1200)) // too close: dropped
    expect(h.size).toBe(2)
    const v = h.view([], 'test')
    const m = v.models.find((x) => x.name === 'm')!
    expect(m.current.rps).toBe(100)
    expect(m.current.errorsPerS).toBe(10)
    // 90 of 100 in (2.5 ms, 5 ms]: rank 50 -> 2.5 + 2.5 * 50/90; rank 99 -> 9/10 into (100, 250] ms.
    expect(m.current.p50Ms).toBeCloseTo(2.5 + 2.5 * (50 / 90), 3)
    expect(m.current.p99Ms).toBeCloseTo(235, 3)
    expect(m.current.batchesPerS).toBe(25)
    expect(m.current.meanBatch).toBe(4)
    expect(m.series.t).toEqual([1000])
    expect(m.series.rps).toEqual([100])
    expect(m.totals).toMatchObject({ requests: 100, errors: 10, batches: 25 })
    expect(m.dispatch.window).toEqual({ idle: 5, full: 20 })
    expect(m.batchSizes.window.find((b) => b.le === 4)?.count).toBe(25)
    expect(m.batchSizes.window.reduce((a, b) => a + b.count, 0)).toBe(25)
  })

  it('starts afresh after a long pause and keeps a bounded history', () => {
    const { registry, gw } = metrics()
    const h = new DashboardHistory({ keep: 3, maxGapMs: 5000 })
    for (let t = 0; t <= 4000; t += 1000) {
      gw.requests.inc({ model: 'm', code: 'OK' }, 10)
      h.add(snapshotFromFamilies(registry.collect(), t))
    }
    expect(h.size).toBe(3)
    expect(h.view([], 'x').models[0]!.series.rps).toEqual([10, 10])
    h.add(snapshotFromFamilies(registry.collect(), 60_000))
    expect(h.size).toBe(1)
    const v = h.view([], 'x')
    expect(v.models[0]!.series.t).toEqual([])
    expect(v.models[0]!.current.rps).toBe(0)
    expect(v.now).toBe(60_000)
  })

  it('reads discovery answers and merges them into the $SRV summaries', () => {
    const disc = workerFromDiscovery(
      { worker: 'w1', models: [{ name: 'm', ready: true, queued: 2, maxBatchSize: 16, maxQueue: 100, policy: 'eager', cost: { a: 1.5, c: 0.25, samples: 9 } }, { bad: 1 }] },
      'x',
    )
    expect(disc).toEqual({
      id: 'w1',
      models: [{ name: 'm', ready: true, queued: 2, maxBatchSize: 16, maxQueue: 100, policy: 'eager', cost: { a: 1.5, c: 0.25, samples: 9 } }],
    })
    expect(workerFromDiscovery('nope', 'x')).toBeUndefined()
    expect(workerFromDiscovery({ models: [] }, 'fallback')?.id).toBe('fallback')
    const summary: WorkerSummary = {
      id: 'w1',
      version: '0.1.0',
      state: 'serving',
      started: null,
      models: ['m'],
      stats: { requests: 40, errors: 1, queued: 3, batches: 10 },
      endpoints: [
        {
          model: 'm',
          subject: 'cohort.infer.m',
          queue_group: 'cohort.q.m',
          ready: true,
          max_batch_size: 16,
          max_delay_ms: 5,
          policy: 'eager',
          concurrency: 1,
          requests: 40,
          errors: 1,
          last_error: null,
          average_processing_ms: 3.5,
          queued: 3,
          running: 4,
          batches: 10,
          mean_batch_size: 4,
        },
      ],
    }
    const merged = mergeWorkers([summary], [disc!, { id: 'old', models: [] }])
    expect(merged.map((w) => w.id)).toEqual(['old', 'w1'])
    expect(merged[1]).toEqual({
      id: 'w1',
      state: 'serving',
      models: [
        {
          name: 'm',
          ready: true,
          queued: 3,
          running: 4,
          maxBatchSize: 16,
          maxQueue: 100,
          maxDelayMs: 5,
          policy: 'eager',
          concurrency: 1,
          requests: 40,
          errors: 1,
          batches: 10,
          meanBatchSize: 4,
          avgProcessingMs: 3.5,
          cost: { a: 1.5, c: 0.25, samples: 9 },
        },
      ],
    })
  })
})

describe('dashboard routes', () => {
  it('serves the page and its assets with a strict CSP', async () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    const app = createApp({ transport, metaTimeoutMs: 30 })
    const page = await app.request('/dashboard')
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
    const html = await page.text()
    expect(html).toContain('src="dashboard/app.js"')
    expect(html).toContain('data-testid="models"')
    expect(html).not.toMatch(/https?:\/\//) // nothing from a CDN
    const js = await app.request('/dashboard/app.js')
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/)
    expect(await js.text()).toContain('fetch("dashboard/data"')
    expect((await app.request('/dashboard/app.css')).headers.get('content-type')).toMatch(/^text\/css/)
    const slash = await app.request('/dashboard/')
    expect(slash.status).toBe(302)
    expect(slash.headers.get('location')).toBe('../dashboard')
  })

  it('answers rates, percentiles and batch sizes from the registry, with a fake clock', async () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    const { registry, gw, wk } = metrics()
    let now = 10_000
    const app = new Hono()
    const core = createGatewayCore({ transport, metaTimeoutMs: 30, workerLoss: false })
    registerDashboard(app, core.options, core.upstream, registry, { now: () => now })
    const first = (await (await app.request('/dashboard/data')).json()) as DashboardData
    expect(first).toMatchObject({ v: 1, now: 10_000, models: [], workers: [], workerMetrics: true, workersSource: 'discovery' })
    for (let i = 0; i < 50; i++) {
      gw.requests.inc({ model: 'm', code: 'OK' })
      gw.duration.observe({ model: 'm' }, 0.02)
    }
    wk.batchSize.observe({ model: 'm' }, 10)
    wk.batchSize.observe({ model: 'm' }, 40)
    now += 2000
    const res = await app.request('/dashboard/data')
    expect(res.headers.get('cache-control')).toBe('no-store')
    const d = (await res.json()) as DashboardData
    const m = d.models.find((x) => x.name === 'm')!
    expect(m.current.rps).toBe(25)
    expect(m.current.p50Ms).toBeCloseTo(17.5, 3) // all in (10, 25] ms: half way through rank 25 of 50
    expect(m.current.meanBatch).toBe(25)
    expect(m.batchSizes.total.filter((b) => b.count > 0).map((b) => b.le)).toEqual([16, 64])
    expect(m.batchSizes.total.at(-1)?.le).toBeNull() // +Inf is null in JSON
    // A poll sooner than the sample interval answers the same view without sampling.
    now += 100
    expect(((await (await app.request('/dashboard/data')).json()) as DashboardData).now).toBe(12_000)
  })

  it('shows an embedded worker and the traffic sent through the gateway', async () => {
    const transport = new InProcessTransport()
    const registry = new Registry()
    const doubler = definePredictor({
      name: 'doubler',
      input: Type.Object({ x: Type.Number() }),
      predict: async (xs) => {
        await new Promise((r) => setTimeout(r, 5))
        return xs.map((i) => ({ y: i.x * 2 }))
      },
    })
    const worker = new CohortWorker({ transport, registry, id: 'w-test', runners: [new PredictorRunner(doubler)] })
    await worker.start()
    cleanups.push(async () => {
      await worker.drain()
      await transport.close()
    })
    const app = createApp({ transport, registry, metaTimeoutMs: 40 })
    const first = (await (await app.request('/dashboard/data')).json()) as DashboardData
    expect(first.workerMetrics).toBe(true)
    expect(first.workers.map((w) => w.id)).toEqual(['w-test'])
    expect(first.workers[0]!.models[0]).toMatchObject({ name: 'doubler', ready: true, queued: 0 })
    expect(first.models.map((m) => m.name)).toEqual(['doubler'])
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        Promise.resolve(
          app.request('/models/doubler/predictions', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ input: { x: i } }),
          }),
        ),
      ),
    )
    expect(replies.every((r) => r.status === 200)).toBe(true)
    await new Promise((r) => setTimeout(r, 550))
    const d = (await (await app.request('/dashboard/data')).json()) as DashboardData
    const m = d.models.find((x) => x.name === 'doubler')!
    expect(m.totals.requests).toBe(40)
    expect(m.current.rps).toBeGreaterThan(0)
    expect(m.current.p50Ms).toBeGreaterThan(0)
    expect(m.current.p99Ms).toBeGreaterThanOrEqual(m.current.p50Ms!)
    expect(m.totals.items).toBe(40)
    expect(m.batchSizes.total.reduce((a, b) => a + b.count, 0)).toBe(m.totals.batches)
    expect(m.current.meanBatch).toBeGreaterThan(1) // 40 at once on one executor: they batch
    expect(Object.values(m.dispatch.total).reduce((a, b) => a + b, 0)).toBe(m.totals.batches)
    expect(m.series.rps.length).toBe(1)
  })

  it('samples in the background, so that the first poll already shows the last seconds', async () => {
    const transport = new InProcessTransport()
    const ac = new AbortController()
    cleanups.push(async () => {
      ac.abort()
      await transport.close()
    })
    const { registry, gw } = metrics()
    const app = createApp({ transport, registry, metaTimeoutMs: 20, dashboard: { sampleMs: 100, signal: ac.signal } })
    // Traffic while nobody has the page open.
    const deadline = Date.now() + 10_000
    let samples = 0
    while (Date.now() < deadline && samples < 3) {
      gw.requests.inc({ model: 'm', code: 'OK' }, 5)
      await new Promise((r) => setTimeout(r, 120))
      samples = ((await (await app.request('/dashboard/data')).json()) as DashboardData).models[0]?.series.t.length ?? 0
    }
    // Every poll takes at most one sample: three points (four samples) mean the timer sampled too.
    expect(samples).toBeGreaterThanOrEqual(3)
    // Aborted: no more samples.
    ac.abort()
    const before = ((await (await app.request('/dashboard/data')).json()) as DashboardData).models[0]!.series.t.length
    await new Promise((r) => setTimeout(r, 600))
    const v = (await (await app.request('/dashboard/data')).json()) as DashboardData
    expect(v.models[0]!.series.t.length).toBe(before + 1) // the poll's own sample only
  })

  it('serves the page open and the data only with a bearer key when authentication is on', async () => {
    const transport = new InProcessTransport()
    cleanups.push(() => transport.close())
    const app = createApp({ transport, metaTimeoutMs: 20, apiKeys: ['s3cret'] })
    for (const path of ['/dashboard', '/dashboard/app.js', '/dashboard/app.css']) {
      expect((await app.request(path)).status, path).toBe(200)
    }
    expect((await app.request('/dashboard/data')).status).toBe(401)
    expect((await app.request('/dashboard/data', { headers: { authorization: 'Bearer nope' } })).status).toBe(401)
    // A key in the URL is not a credential (it would leak into logs).
    expect((await app.request('/dashboard/data?key=s3cret')).status).toBe(401)
    expect((await app.request('/dashboard/data?token=s3cret')).status).toBe(401)
    const ok = await app.request('/dashboard/data', { headers: { authorization: 'Bearer s3cret' } })
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as DashboardData).v).toBe(1)
    // The page's script sends the stored key as a bearer header, never in the URL.
    const js = await (await app.request('/dashboard/app.js')).text()
    expect(js).toContain('sessionStorage')
    expect(js).toContain('Bearer ')
  })
})
