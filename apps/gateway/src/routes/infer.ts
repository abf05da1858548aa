import type { Context } from 'hono'
import { CohortError, fromWire, isValidModelName, type InferReply, type InferRequest, type WireTensor } from '@cohort/protocol'
import type { GatewayMetrics } from '@cohort/metrics'
import { bodyOf, clientGone } from '../body.ts'
import { admitAtDoor, deadlineAfter, effectiveTimeoutMs } from '../deadline.ts'
import { outputJson, parseInferBody } from '../oip.ts'
import { stringifyWithRaw } from '../json-exact.ts'
import { RequestObservation } from '../observe.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'

/** Grace after the deadline before the gateway stops waiting: the worker's own 504 usually wins. */
const REPLY_GRACE_MS = 50

/** Check a model name and version from the path. */
export function checkModelPath(model: string, version: string | undefined): void {
  if (!isValidModelName(model)) {
    throw new CohortError('MODEL_NOT_FOUND', `"${model}" is not a valid model name`)
  }
  if (version !== undefined && version !== '1') {
    throw new CohortError('MODEL_NOT_FOUND', `model "${model}" has no version "${version}" (each name serves version 1)`)
  }
}

/** Label value for a model in request metrics: unknown or invalid names share one series (bounded memory). */
export function metricModel(model: string, code: string): string {
  return code === 'MODEL_NOT_FOUND' || code === 'NOT_FOUND' || !isValidModelName(model) ? '_unknown' : model
}

/** Throw the first failed item's error, if any. */
export function firstItemError(reply: InferReply): void {
  const e = reply.errors?.find((x) => x !== null && x !== undefined)
  if (e) {
    throw fromWire(e)
  }
}

/** `POST /v2/models/{m}[/versions/{v}]/infer`: OIP JSON or binary tensor data. */
export function inferHandler(o: ResolvedGatewayOptions, up: Upstream, metrics: GatewayMetrics) {
  return async function infer(c: Context): Promise<Response> {
    const model = c.req.param('model') ?? ''
    const t0 = performance.now()
    let code = 'OK'
    const obs = new RequestObservation(o, c, model)
    try {
      checkModelPath(model, c.req.param('version'))
      const lag = admitAtDoor(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), o.adapter?.queueDelayMs)
      const body = await bodyOf(c, o)
      const oip = parseInferBody(body, c.req.header('inference-header-content-length'))
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), oip.parameters['timeout'])
      const priority = oip.parameters['priority']
      const requestId = obs.requestId
      const req: InferRequest = {
        v: 1,
        id: requestId,
        model,
        deadline: deadlineAfter(timeoutMs, lag),
        tensors: oip.tensors,
        ...obs.trace,
        ...(typeof priority === 'number' ? { priority } : {}),
        ...(oip.outputs ? { outputs: oip.outputs.map((x) => x.name) } : {}),
      }
      obs.sent(req)
      // Safe to resend to another worker if the one holding it is lost: the client named the request.
      const retryable = c.req.header('idempotency-key') !== undefined || oip.id !== undefined
      const reply = await up.infer(req, timeoutMs + REPLY_GRACE_MS, clientGone(c, o), { retryable })
      firstItemError(reply)
      const tensors = reply.tensors ?? {}
      const order = oip.outputs?.map((x) => x.name) ?? Object.keys(tensors)
      const binaryNames = new Set(
        // An output's own binary_data wins over the request's binary_data_output (as in Triton).
        oip.outputs ? oip.outputs.filter((x) => x.binary ?? oip.binaryOutput).map((x) => x.name) : oip.binaryOutput ? order : [],
      )
      const head = {
        model_name: model,
        model_version: '1',
        id: oip.id ?? requestId,
        outputs: [] as Record<string, unknown>[],
      }
      const blobs: Uint8Array[] = []
      const raw = new Map<string, string>()
      for (const name of order) {
        const t = tensors[name]
        if (!t) {
          continue
        }
        if (binaryNames.has(name)) {
          head.outputs.push({ name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.byteLength } })
          blobs.push(t.bytes)
        } else {
          head.outputs.push(outputJson(name, t as WireTensor, raw))
        }
      }
      const json = stringifyWithRaw(head, raw)
      if (blobs.length === 0) {
        return c.body(json, 200, { 'content-type': 'application/json' })
      }
      return binaryResponse(json, blobs)
    } catch (e) {
      code = e instanceof CohortError ? e.code : 'INTERNAL'
      throw obs.fail(e)
    } finally {
      const label = metricModel(model, code)
      metrics.requests.inc({ model: label, code })
      metrics.duration.observe({ model: label }, (performance.now() - t0) / 1000)
      obs.end()
    }
  }
}

function binaryResponse(text: string, blobs: Uint8Array[]): Response {
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
    },
  })
}
