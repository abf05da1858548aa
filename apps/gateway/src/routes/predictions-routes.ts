import type { Hono } from 'hono'
import type { InferenceDoor } from '../door.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { DurableJobs } from '../jobs/durable.ts'
import { MemoryJobs } from '../jobs/memory.ts'
import type { PredictionJobs } from '../jobs/types.ts'
import { bulkHandler } from './bulk.ts'
import { cancelPredictionHandler, getPredictionHandler, predictionsHandler, putPredictionHandler } from './predictions.ts'
import { predictionMetaRoutes } from './predictions-meta.ts'

/**
 * Cog-style routes: predictions (sync, async, idempotent PUT, GET, cancel), bulk, `/health-check`
 * and `/openapi.json`. Async predictions live in JetStream when `o.jobs` is set, else in memory.
 */
export function registerPredictions(app: Hono, o: ResolvedGatewayOptions, door: InferenceDoor): PredictionJobs {
  const up: Upstream = door.o.upstream
  const jobs: PredictionJobs = o.jobs ? new DurableJobs(o.jobs, up, o.predictions) : new MemoryJobs(door, o.predictions)
  const predictions = predictionsHandler(o, door, jobs)
  const put = putPredictionHandler(o, door, jobs)
  const get = getPredictionHandler(jobs)
  const cancel = cancelPredictionHandler(jobs)
  app.post('/predictions', predictions)
  app.post('/models/:model/predictions', predictions)
  // Bulk as `POST .../predictions/:id` with id "bulk", not a route of its own: Hono's RegExpRouter
  // refuses a static segment where another route of the method has a parameter (`:id/cancel`),
  // and one such route sends every request through the slower TrieRouter (app.ts).
  const bulk = bulkHandler(o, door)
  app.post('/models/:model/predictions/:id', (c) => (c.req.param('id') === 'bulk' ? bulk(c) : c.notFound()))
  app.put('/predictions/:id', put)
  app.put('/models/:model/predictions/:id', put)
  app.get('/predictions/:id', get)
  app.get('/models/:model/predictions/:id', get)
  app.post('/predictions/:id/cancel', cancel)
  app.post('/models/:model/predictions/:id/cancel', cancel)
  const meta = predictionMetaRoutes(o, up)
  app.get('/health-check', (c) => meta.healthCheck(c))
  app.get('/openapi.json', (c) => meta.openapi(c))
  return jobs
}
