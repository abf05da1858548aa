import type { Context } from 'hono'
import { bodyOf, clientGone } from '../body.ts'
import type { DoorPayload, InferenceDoor } from '../door.ts'
import { hasRawJson, outputJson, parseInferBody } from '../oip.ts'
import { stringifyWithRaw } from '../json-exact.ts'
import { httpArrival } from './arrival.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import { headerOf } from '../request-header.ts'
import { responseIdHeaders } from '../observe.ts'

export { firstItemError, metricModel } from '../door.ts'
export { checkModelPath } from '../admission.ts'

/** `POST /v2/models/{m}[/versions/{v}]/infer`: OIP JSON or binary tensor data, a codec over the door. */
export function inferHandler(o: ResolvedGatewayOptions, door: InferenceDoor) {
  return function infer(c: Context): Promise<Response> {
    const model = c.req.param('model') ?? ''
    const version = c.req.param('version')
    return door.serve(httpArrival(c, 'infer', model, version), async (p) => {
      const body = await bodyOf(c, o)
      const oip = parseInferBody(body, headerOf(c, 'inference-header-content-length'))
      const priority = oip.parameters['priority']
      // Safe to resend to another worker if the one holding it is lost: the client named the request.
      const retryable = headerOf(c, 'idempotency-key') !== undefined || oip.id !== undefined
      // Built field by field, not by spreading optional literals (a temporary object for each).
      const call: DoorPayload = { tensors: oip.tensors }
      if (typeof priority === 'number') {
        call.priority = priority
      }
      if (oip.outputs) {
        call.outputs = oip.outputs.map((x) => x.name)
      }
      if (version !== undefined) {
        call.version = version
      }
      const reply = await p.infer(call, { timeoutMs: p.timeoutMs(oip.parameters['timeout']), retryable, signal: clientGone(c, o) })
      const requestId = p.requestId
      const tensors = reply.tensors ?? {}
      const order = oip.outputs?.map((x) => x.name) ?? Object.keys(tensors)
      // An output's own binary_data wins over the request's binary_data_output (as in Triton). None asked: no set.
      const binaryNames = oip.outputs || oip.binaryOutput ? new Set(oip.outputs ? oip.outputs.filter((x) => x.binary ?? oip.binaryOutput).map((x) => x.name) : order) : undefined
      const head = {
        model_name: model,
        model_version: reply.version ?? version ?? '1',
        id: oip.id ?? requestId,
        outputs: [] as Record<string, unknown>[],
      }
      const blobs: Uint8Array[] = []
      let raw: Map<string, string> | undefined // INT64/UINT64 outputs' exact text (outputJson)
      for (const name of order) {
        const t = tensors[name]
        if (!t) {
          continue
        }
        if (hasRawJson(t)) {
          raw ??= new Map()
        }
        if (binaryNames?.has(name) === true) {
          head.outputs.push({ name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.byteLength } })
          blobs.push(t.bytes)
        } else {
          head.outputs.push(outputJson(name, t, raw))
        }
      }
      const json = raw === undefined ? JSON.stringify(head) : stringifyWithRaw(head, raw)
      // Built here with plain headers, the ids among them: Hono's c.body() makes a Web Headers for more than one.
      if (blobs.length === 0) {
        return new Response(json, { status: 200, headers: responseIdHeaders(c, { 'content-type': 'application/json' }) })
      }
      return binaryResponse(json, blobs, responseIdHeaders(c, {}))
    })
  }
}

function binaryResponse(text: string, blobs: Uint8Array[], ids: Record<string, string>): Response {
  const json = new TextEncoder().encode(text)
  const total = json.byteLength + blobs.reduce((a, b) => a + b.byteLength, 0)
  const out = new Uint8Array(total)
  out.set(json, 0)
  let off = json.byteLength
  for (const b of blobs) {
    out.set(b, off)
    off += b.byteLength
  }
  return new Response(out, {
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(json.byteLength),
      ...ids,
    },
  })
}
