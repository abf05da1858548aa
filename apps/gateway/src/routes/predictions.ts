import type { Context } from 'hono'
import { CohortError, type InferRequest } from '@cohort/protocol'
import type { GatewayMetrics } from '@cohort/metrics'
import { bodyOf, clientGone, parseJson } from '../body.ts'
import { effectiveTimeoutMs } from '../deadline.ts'
import { RequestObservation } from '../observe.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath, firstItemError, metricModel } from './infer.ts'

/**
 * `POST /models/{m}/predictions` and `POST /predictions` (Cog-style, synchronous):
 * `{"input": {...}}` -> `{"status": "succeeded", "output": ...}`. Schema failures are 422, as in Cog.
 */
export function predictionsHandler(o: ResolvedGatewayOptions, up: Upstream, metrics: GatewayMetrics) {
  return async function predictions(c: Context): Promise<Response> {
    const t0 = performance.now()
    let model = c.req.param('model') ?? o.defaultModel ?? ''
    let code = 'OK'
    const obs = new RequestObservation(o, c, model)
    try {
      if (!model) {
        const { models } = await up.discover()
        model = models[0]?.name ?? ''
        if (!model) {
          throw new CohortError('NO_WORKER', 'no model is being served')
        }
      }
      obs.model = model
      checkModelPath(model, undefined)
      const body = parseJson(await bodyOf(c, o))
      if (typeof body !== 'object' || body === null || !('input' in body)) {
        throw new CohortError('BAD_REQUEST', 'body must be {"input": {...}}')
      }
      const b = body as { input: unknown; id?: unknown }
      const id = typeof b.id === 'string' ? b.id : crypto.randomUUID()
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), undefined)
      const createdAt = new Date().toISOString()
      const req: InferRequest = { v: 1, id: obs.requestId, model, deadline: Date.now() + timeoutMs, items: [b.input], ...obs.trace }
      obs.sent(req)
      const reply = await up.infer(req, timeoutMs + 50, clientGone(c, o))
      firstItemError(reply)
      const predictTime = reply.timing?.[0]?.computeMs
      return c.json({
        id,
        status: 'succeeded',
        input: b.input,
        output: reply.items?.[0] ?? null,
        created_at: createdAt,
        completed_at: new Date().toISOString(),
        metrics: predictTime !== undefined ? { predict_time: predictTime / 1000 } : {},
      })
    } catch (e) {
      code = e instanceof CohortError ? e.code : 'INTERNAL'
      if (e instanceof CohortError && e.code === 'INVALID_INPUT') {
        obs.fail(e, 422)
        return c.json({ error: e.message, code: e.code, status: 'failed' }, 422)
      }
      throw obs.fail(e)
    } finally {
      const label = metricModel(model, code)
      metrics.requests.inc({ model: label, code })
      metrics.duration.observe({ model: label }, (performance.now() - t0) / 1000)
      obs.end()
    }
  }
}
