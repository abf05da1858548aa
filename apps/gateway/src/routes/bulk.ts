import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import type { GatewayMetrics } from '@cohort/metrics'
import { bodyOf, clientGone, parseJson } from '../body.ts'
import { effectiveTimeoutMs } from '../deadline.ts'
import { RequestObservation } from '../observe.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath } from './infer.ts'

/** One bulk result: the prediction at `index` of the request's `inputs`. */
export interface BulkResult {
  index: number
  status: 'succeeded' | 'failed'
  output?: unknown
  error?: string
  code?: string
}

/**
 * `POST /models/{m}/predictions/bulk` with `{"inputs": [...]}`: each input becomes its own item
 * (batched with all other traffic by the workers); a bad item fails alone. Results come in input
 * order as JSON, or as they complete with `Accept: application/x-ndjson` or `text/event-stream`.
 */
export function bulkHandler(o: ResolvedGatewayOptions & { maxBulkInputs?: number }, up: Upstream, metrics: GatewayMetrics) {
  const maxInputs = o.maxBulkInputs ?? 1000
  return async function bulk(c: Context): Promise<Response> {
    const model = c.req.param('model') ?? ''
    // One gateway span for the bulk call; each input's envelope is a child of it.
    const obs = new RequestObservation(o, c, model)
    let endsWithStream = false
    try {
      checkModelPath(model, undefined)
      const body = parseJson(await bodyOf(c, o))
      const inputs = (body as { inputs?: unknown } | null)?.inputs
      if (!Array.isArray(inputs) || inputs.length === 0) {
        throw new CohortError('BAD_REQUEST', 'body must be {"inputs": [...]} with at least one input')
      }
      if (inputs.length > maxInputs) {
        throw new CohortError('PAYLOAD_TOO_LARGE', `a bulk request takes at most ${maxInputs} inputs, got ${inputs.length}`)
      }
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), undefined)
      const deadline = Date.now() + timeoutMs
      const signal = clientGone(c, o)
      obs.items = inputs.length
      const trace = obs.trace
      // Fail fast, before fanning out, when no worker serves the model at all.
      await up.meta(model)
      const one = async (input: unknown, index: number): Promise<BulkResult> => {
        const t0 = performance.now()
        const id = crypto.randomUUID()
        try {
          const reply = await up.infer(
            { v: 1, id, model, deadline, items: [input], ...trace },
            Math.max(1, deadline - Date.now()) + 50,
            signal,
          )
          const err = reply.errors?.[0]
          if (err) {
            obs.failedItem(id, index, err.code, err.message)
            metrics.requests.inc({ model, code: err.code })
            return { index, status: 'failed', error: err.message, code: err.code }
          }
          metrics.requests.inc({ model, code: 'OK' })
          return { index, status: 'succeeded', output: reply.items?.[0] ?? null }
        } catch (e) {
          if (!(e instanceof CohortError)) {
            o.onUnexpectedError(e, { ...obs.fields(), requestId: id, index })
          }
          const ce = e instanceof CohortError ? e : new CohortError('INTERNAL', 'internal error')
          obs.failedItem(id, index, ce.code, ce.message)
          metrics.requests.inc({ model, code: ce.code })
          return { index, status: 'failed', error: ce.message, code: ce.code }
        } finally {
          metrics.duration.observe({ model }, (performance.now() - t0) / 1000)
        }
      }
      const accept = c.req.header('accept') ?? ''
      const streaming = accept.includes('application/x-ndjson') ? 'ndjson' : accept.includes('text/event-stream') ? 'sse' : undefined
      if (!streaming) {
        const results = await Promise.all(inputs.map(one))
        const failed = results.filter((r) => r.status === 'failed').length
        return c.json({ model, total: results.length, succeeded: results.length - failed, failed, results })
      }
      const enc = new TextEncoder()
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          let left = inputs.length
          const write = (r: BulkResult) => {
            const line = JSON.stringify(r)
            controller.enqueue(enc.encode(streaming === 'ndjson' ? `${line}\n` : `event: prediction\ndata: ${line}\n\n`))
            if (--left === 0) {
              if (streaming === 'sse') {
                controller.enqueue(enc.encode(`event: done\ndata: {"total":${inputs.length}}\n\n`))
              }
              controller.close()
              obs.end()
            }
          }
          inputs.forEach((input, i) => {
            void one(input, i).then(write)
          })
        },
      })
      endsWithStream = true
      return new Response(stream, {
        headers: {
          'content-type': streaming === 'ndjson' ? 'application/x-ndjson' : 'text/event-stream',
          'cache-control': 'no-cache',
        },
      })
    } catch (e) {
      throw obs.fail(e)
    } finally {
      if (!endsWithStream) {
        obs.end()
      }
    }
  }
}
