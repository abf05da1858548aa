import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { GatewayMetrics } from '@cohort/metrics'
import { bodyOf, clientGone, parseJson } from '../body.ts'
import { effectiveTimeoutMs } from '../deadline.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath, firstItemError } from './infer.ts'

/**
 * `POST /models/{m}/predictions` and `POST /predictions` (Cog-style, synchronous):
 * `{"input": {...}}` -> `{"status": "succeeded", "output": ...}`. Schema failures are 422, as in Cog.
 */
export function predictionsHandler(o: ResolvedGatewayOptions, up: Upstream, metrics: GatewayMetrics) {
  return async function predictions(c: Context): Promise<Response> {
    const t0 = performance.now()
    let model = c.req.param('model') ?? o.defaultModel ?? ''
    let code = 'OK'
    try {
      if (!model) {
        const { models } = await up.discover()
        model = models[0]?.name ?? ''
        if (!model) {
          throw new CohortError('NO_WORKER', 'no model is being served')
        }
      }
      checkModelPath(model, undefined)
      const body = parseJson(await bodyOf(c, o))
      if (typeof body !== 'object' || body === null || !('input' in body)) {
        throw new CohortError('BAD_REQUEST', 'body must be {"input": {...}}')
      }
      const b = body as { input: unknown; id?: unknown }
      const id = typeof b.id === 'string' ? b.id : crypto.randomUUID()
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), undefined)
      const createdAt = new Date().toISOString()
      const reply = await up.infer(
        { v: 1, id: crypto.randomUUID(), model, deadline: Date.now() + timeoutMs, items: [b.input] },
        timeoutMs + 50,
        clientGone(c, o),
      )
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
        return c.json({ error: e.message, code: e.code, status: 'failed' }, 422)
      }
      throw e
    } finally {
      metrics.requests.inc({ model, code })
      metrics.duration.observe({ model }, (performance.now() - t0) / 1000)
    }
  }
}
