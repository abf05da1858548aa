import type * as grpc from '@grpc/grpc-js'
import { CohortError, type InferRequest, type WireTensor } from '@cohort/protocol'
import type { Upstream } from '../upstream.ts'
import { checkModelPath, firstItemError } from '../routes/infer.ts'
import { grpcInputs, type GrpcInputTensor } from './tensors.ts'

/** Grace after the deadline before the gateway stops waiting (as for HTTP). */
const REPLY_GRACE_MS = 50

// Minimal shapes of the decoded messages (proto-loader: keepCase, longs as strings, defaults).
export interface InferParameter {
  parameter_choice?: string
  [k: string]: unknown
}
export interface ModelInferRequestMsg {
  model_name: string
  model_version: string
  id: string
  parameters: Record<string, InferParameter>
  inputs: GrpcInputTensor[]
  outputs: { name: string }[]
  raw_input_contents: Uint8Array[]
}

function paramValue(p: InferParameter | undefined): unknown {
  if (!p || !p.parameter_choice) {
    return undefined
  }
  const v = p[p.parameter_choice]
  return p.parameter_choice === 'int64_param' || p.parameter_choice === 'uint64_param' ? Number(v) : v
}

/**
 * One `ModelInfer` over the upstream (NATS) path shared with HTTP: inputs from raw or typed
 * contents, deadline = the smallest of the server's, the `timeout` parameter (µs) and the call's
 * gRPC deadline; outputs as `raw_output_contents` in the requested (else the model's) order.
 */
export async function modelInfer(
  up: Upstream,
  serverTimeoutMs: number,
  r: ModelInferRequestMsg,
  deadline: grpc.Deadline | undefined,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const model = r.model_name
  checkModelPath(model, r.model_version === '' ? undefined : r.model_version)
  const { tensors } = grpcInputs(r.inputs ?? [], r.raw_input_contents ?? [])
  let timeoutMs = serverTimeoutMs
  const t = paramValue(r.parameters?.['timeout'])
  if (t !== undefined) {
    if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) {
      throw new CohortError('BAD_REQUEST', 'parameters.timeout must be a non-negative number of microseconds')
    }
    if (t > 0) {
      timeoutMs = Math.min(timeoutMs, t / 1000)
    }
  }
  if (deadline !== undefined && deadline !== Infinity) {
    const at = deadline instanceof Date ? deadline.getTime() : deadline
    timeoutMs = Math.min(timeoutMs, Math.max(1, at - Date.now()))
  }
  const priority = paramValue(r.parameters?.['priority'])
  const outputs = (r.outputs ?? []).map((o) => o.name)
  const req: InferRequest = {
    v: 1,
    id: crypto.randomUUID(),
    model,
    deadline: Date.now() + timeoutMs,
    tensors,
    ...(typeof priority === 'number' ? { priority } : {}),
    ...(outputs.length > 0 ? { outputs } : {}),
  }
  const reply = await up.infer(req, timeoutMs + REPLY_GRACE_MS, signal)
  firstItemError(reply)
  const out = reply.tensors ?? {}
  const order = outputs.length > 0 ? outputs : Object.keys(out)
  const res = {
    model_name: model,
    model_version: '1',
    id: r.id ?? '',
    parameters: {},
    outputs: [] as { name: string; datatype: string; shape: number[] }[],
    raw_output_contents: [] as Uint8Array[],
  }
  for (const name of order) {
    const t = out[name] as WireTensor | undefined
    if (t) {
      res.outputs.push({ name, datatype: t.datatype, shape: t.shape })
      res.raw_output_contents.push(t.bytes)
    }
  }
  return res
}
