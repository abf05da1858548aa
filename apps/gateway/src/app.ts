import { Hono, type Context } from 'hono'
import { CohortError, type ModelMeta } from '@cohort/protocol'
import { PROMETHEUS_CONTENT_TYPE } from '@cohort/metrics'
import { asCohortError, errorResponse } from './errors.ts'
import { closeIfBodyUnread } from './body.ts'
import type { GatewayOptions, ResolvedGatewayOptions } from './options.ts'
import { createGatewayCore, isGatewayCore, type GatewayCore } from './core.ts'
import type { InferenceDoor } from './door.ts'
import { EarlyDoor } from './early.ts'
import type { Upstream } from './upstream.ts'
import { checkModelPath, inferHandler } from './routes/infer.ts'
import { registerPredictions } from './routes/predictions-routes.ts'
import { adminRoutes } from './routes/admin.ts'
import { tritonConfig } from './routes/config.ts'
import { modelStats } from './routes/stats.ts'
import { responseIds } from './observe.ts'
import { gatewayMiddleware } from './middleware/index.ts'
import { registerDashboard } from './routes/dashboard.ts'
import { registerRepository } from './routes/repository.ts'
import { registerTritonGenerate } from './routes/generate.ts'
import { registerOpenAi } from './routes/openai.ts'

function oipMeta(m: ModelMeta) {
  return {
    name: m.name,
    versions: m.versions,
    platform: m.platform,
    inputs: m.inputs,
    outputs: m.outputs,
    // A model's own hard batch limit (a leading dimension fixed at n), only when it has one.
    ...(m.batchLimit ? { parameters: { batch_limit: m.batchLimit.maxBatchSize, batch_limit_reason: m.batchLimit.reason } } : {}),
  }
}

/** The gateway's HTTP app: a Hono app, its {@link GatewayCore} and an idempotent `close()`. */
export type GatewayApp = Hono & {
  /** The core it serves (shared with gRPC when the app was made from one). */
  readonly core: GatewayCore
  /** The door at the listener (early.ts): a runtime adapter judges inference requests with it before the app runs. */
  readonly early: EarlyDoor
  /**
   * Stop what the app started: its in-memory async jobs' webhook retries, and the core's liveness
   * detector when the app built its core from options (a core passed in is its owner's to close).
   * Idempotent. The transport is the caller's.
   */
  close(): Promise<void>
}

/**
 * The gateway as a pure Hono app (Web Request/Response only): runs unchanged on Node, Bun,
 * Deno and workerd. It keeps no state a restart loses: metadata comes from the workers. Pass a
 * {@link GatewayCore} to serve one core from several codecs (`cohort serve --grpc-port`: HTTP and
 * gRPC are one gateway), or options to build one.
 */
export function createApp(from: GatewayOptions | GatewayCore): GatewayApp {
  const owned = !isGatewayCore(from)
  const core = owned ? createGatewayCore(from) : from
  const { options: o, registry, upstream: up, door } = core
  const app = new Hono()

  useEntrySteps(app, o, door)
  registerServerRoutes(app, o, up)
  registerModelRoutes(app, o, up, door)
  const jobs = registerPredictions(app, o, door)
  // Generative models (docs/generative.md): Triton's generate extension and the OpenAI-compatible API.
  registerTritonGenerate(app, o, door)
  registerOpenAi(app, o, door, up)

  const admin = adminRoutes(o, up)
  app.get('/admin/models/:model/batching', (c) => admin.get(c))
  app.put('/admin/models/:model/batching', (c) => admin.put(c))
  app.delete('/admin/models/:model/batching', (c) => admin.delete(c))
  registerRepository(app, o, up)

  registerDashboard(app, o, up, registry)

  app.get('/metrics', (c) => {
    const text = registry.render() + (o.extraMetrics?.() ?? '')
    return c.body(text, 200, { 'content-type': PROMETHEUS_CONTENT_TYPE })
  })
  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await jobs.close()
      if (owned) {
        await core.close()
      }
    })())
  return Object.assign(app, { core, early: new EarlyDoor(door, o), close })
}

/** What every request passes first: the error and not-found answers, its arrival time, ids, the gateway middleware, draining. */
function useEntrySteps(app: Hono, o: ResolvedGatewayOptions, door: InferenceDoor): void {
  app.onError((e, c) => {
    closeIfBodyUnread(c) // an answer before the body was read: the connection rule (refusal.ts)
    return errorResponse(c, asCohortError(e, o.onUnexpectedError))
  })
  app.notFound((c) => errorResponse(c, new CohortError('NOT_FOUND', `no route ${c.req.method} ${c.req.path}`)))

  // One middleware for what every request gets (the adapter's readings, the ids, the draining
  // rule): each Hono middleware is a dispatch and an async frame per request.
  const adapter = o.adapter
  const arrive =
    adapter?.arrivedAt || adapter?.admission || adapter?.headers
      ? (c: Context) => {
          c.set('cohortArrivedAt', adapter.arrivedAt?.(c))
          const adm = adapter.admission?.(c)
          if (adm !== undefined) {
            c.set('cohortAdmission', adm)
          }
          const h = adapter.headers?.(c)
          if (h !== undefined) {
            c.set('cohortHeaders', h)
          }
        }
      : undefined
  app.use('*', responseIds({ ...(arrive ? { arrive } : {}), ...(o.draining ? { draining: o.draining } : {}) }))
  for (const mw of gatewayMiddleware(o, door)) {
    app.use('*', mw)
  }
}

/** The server's own routes: health, the workers' view, server metadata and the model list. */
function registerServerRoutes(app: Hono, o: ResolvedGatewayOptions, up: Upstream): void {
  const draining = o.draining
  app.get('/v2/health/live', (c) => c.json({ live: true }))
  app.get('/v2/health/ready', async (c) => {
    if (draining?.()) {
      return c.json({ ready: false, draining: true }, 503)
    }
    const { ready, models, workers } = await up.readiness()
    return c.json({ ready, models, workers }, ready ? 200 : 503)
  })
  app.get('/v2/workers', async (c) => c.json({ workers: await up.workers() }))
  app.get('/v2', (c) =>
    c.json({ name: o.serverName, version: o.serverVersion, extensions: ['binary_tensor_data', 'parameters', 'statistics', 'model_configuration', 'model_repository', 'generate'] }),
  )
  app.get('/v2/models', async (c) => {
    const { models } = await up.discover()
    return c.json({ models: models.map((m) => ({ ...oipMeta(m), ready: m.ready, max_batch_size: m.maxBatchSize })) })
  })
}

/** A model's routes, with and without a version: metadata, readiness, config, statistics and infer. */
function registerModelRoutes(app: Hono, o: ResolvedGatewayOptions, up: Upstream, door: InferenceDoor): void {
  const modelMeta = async (c: Context) => {
    const model = c.req.param('model') ?? ''
    const version = c.req.param('version')
    checkModelPath(model, version)
    return c.json(oipMeta(await up.meta(model, version)))
  }
  const modelReady = async (c: Context) => {
    const model = c.req.param('model') ?? ''
    const version = c.req.param('version')
    checkModelPath(model, version)
    const m = await up.meta(model, version)
    return c.json({ name: model, ready: m.ready }, m.ready ? 200 : 503)
  }
  const modelConfig = async (c: Context) => {
    const model = c.req.param('model') ?? ''
    const version = c.req.param('version')
    checkModelPath(model, version)
    return c.json(tritonConfig(await up.meta(model, version)))
  }
  // `GET /v2/models/stats` (Triton's statistics of every model) is answered by the metadata route,
  // not a route of its own: Hono's RegExpRouter refuses a static segment where another route of
  // the method has a parameter, and one such route sends every request through its TrieRouter
  // (a search and a sort per request). A model named "stats" is shadowed, as it was before.
  const metaOrStats = async (c: Context) => (c.req.param('model') === 'stats' && c.req.param('version') === undefined ? c.json(await modelStats(up)) : modelMeta(c))
  const infer = inferHandler(o, door)
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.get(`${base}/stats`, async (c) => c.json(await modelStats(up, c.req.param('model') ?? '', c.req.param('version'))))
    app.get(base, metaOrStats)
    app.get(`${base}/ready`, modelReady)
    app.get(`${base}/config`, modelConfig)
    app.post(`${base}/infer`, infer)
  }
}
