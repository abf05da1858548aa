import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import { bodyOf, clientGone, parseJson } from '../body.ts'
import type { InferenceDoor } from '../door.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import { httpArrival } from './arrival.ts'
import { headerOf } from '../request-header.ts'

/** One bulk result: the prediction at `index` of the request's `inputs`. */
export interface BulkResult {
  index: number
  status: 'succeeded' | 'failed'
  output?: unknown
  error?: string
  code?: string
}

/** Default most inputs of one bulk request (`maxBulkInputs`); more is 413. */
export const DEFAULT_MAX_BULK_INPUTS = 1000

/**
 * `POST /models/{m}/predictions/bulk` with `{"inputs": [...]}`: each input becomes its own item
 * (batched with all other traffic by the workers); a bad item fails alone. Results come in input
 * order as JSON, or as they complete with `Accept: application/x-ndjson` or `text/event-stream`.
 */
/** The bulk route's pattern (registered as `.../predictions/:id`: predictions-routes.ts says why). */
export const BULK_ROUTE = '/models/:model/predictions/bulk'

export function bulkHandler(o: ResolvedGatewayOptions & { maxBulkInputs?: number }, door: InferenceDoor) {
  const maxInputs = o.maxBulkInputs ?? DEFAULT_MAX_BULK_INPUTS
  return function bulk(c: Context): Promise<Response> {
    const model = c.req.param('model') ?? ''
    // One gateway span for the bulk call; each input's envelope is a child of it. Items are counted, not the call.
    return door.serve(httpArrival(c, 'bulk', model, undefined, BULK_ROUTE), async (p) => {
      p.counted = false
      const body = parseJson(await bodyOf(c, o))
      const inputs = (body as { inputs?: unknown } | null)?.inputs
      if (!Array.isArray(inputs) || inputs.length === 0) {
        throw new CohortError('BAD_REQUEST', 'body must be {"inputs": [...]} with at least one input')
      }
      if (inputs.length > maxInputs) {
        throw new CohortError('PAYLOAD_TOO_LARGE', `a bulk request takes at most ${maxInputs} inputs, got ${inputs.length}`)
      }
      const deadline = p.deadline(p.timeoutMs())
      const signal = clientGone(c, o)
      p.obs.items = inputs.length
      // Fail fast, before fanning out, when no worker serves the model at all.
      await door.o.upstream.heldMeta(model)
      const one = async (input: unknown, index: number): Promise<BulkResult> => {
        const r = await p.item(input, index, { deadline, signal })
        return r.error ? { index, status: 'failed', error: r.error.message, code: r.error.code } : { index, status: 'succeeded', output: r.output }
      }
      const accept = headerOf(c, 'accept') ?? ''
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
              p.end()
            }
          }
          inputs.forEach((input, i) => {
            void one(input, i).then(write)
          })
        },
      })
      p.keepOpen()
      return new Response(stream, {
        headers: {
          'content-type': streaming === 'ndjson' ? 'application/x-ndjson' : 'text/event-stream',
          'cache-control': 'no-cache',
        },
      })
    })
  }
}
