// The gateway's routes fit Hono's RegExpRouter: one route with a static segment where another of
// its method has a parameter makes SmartRouter fall back to the TrieRouter for every request (a
// search, a sort and some 3 KB per request; issue 28). And the two routes folded into parameter
// routes for it still answer as their own routes did.
import { afterAll, describe, expect, it } from 'vitest'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { Type, definePredictor } from '@cohort/predictor'
import { createApp } from './app.ts'

const echo = definePredictor({ name: 'echo', input: Type.Object({ x: Type.Number() }), predict: (xs) => xs.map((v) => v.x) })
const transport = new InProcessTransport()
const worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)] })
await worker.start()
const app = createApp({ transport, metaTimeoutMs: 200 })
afterAll(async () => {
  await worker.drain()
  await transport.close()
})

describe('gateway router', () => {
  it("matches every request with Hono's RegExpRouter, not the TrieRouter fallback", async () => {
    expect((await app.request('/v2/health/live')).status).toBe(200)
    const router = app.router as unknown as { activeRouter?: { name: string } }
    expect(router.activeRouter?.name).toBe('RegExpRouter')
  })

  it('answers GET /v2/models/stats with every model’s statistics', async () => {
    const r = await app.request('/v2/models/stats')
    expect(r.status).toBe(200)
    const body = (await r.json()) as { model_stats: { name: string }[] }
    expect(body.model_stats.map((m) => m.name)).toContain('echo')
  })

  it('serves bulk on POST /models/{m}/predictions/bulk and 404s any other id there', async () => {
    const bulk = await app.request('/models/echo/predictions/bulk', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ x: 1 }, { x: 2 }] }),
    })
    expect(bulk.status).toBe(200)
    const b = (await bulk.json()) as { succeeded: number; results: { output: unknown }[] }
    expect(b.succeeded).toBe(2)
    expect(b.results.map((x) => x.output)).toEqual([1, 2])
    const other = await app.request('/models/echo/predictions/abc', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect(other.status).toBe(404)
    expect(await other.text()).toContain('no route POST /models/echo/predictions/abc')
  })
})
