import type * as grpc from '@grpc/grpc-js'
import type { Passage } from '../../door.ts'
import { grpcInputs, type GrpcInputTensor } from './tensors.ts'

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

/** A parameter's value (int64 ones as numbers); undefined when unset. */
export function paramValue(p: InferParameter | undefined): unknown {
  if (!p || !p.parameter_choice) {
    return undefined
  }
  const v = p[p.parameter_choice]
  return p.parameter_choice === 'int64_param' || p.parameter_choice === 'uint64_param' ? Number(v) : v
}

/**
 * The bytes a decoded request holds, for the door's in-flight bound: its raw input contents, plus
 * 8 bytes per element of typed contents (a number's size; a bytes element counts its length).
 */
export function messageBytes(r: Pick<ModelInferRequestMsg, 'raw_input_contents' | 'inputs'>): number {
  let n = 0
  for (const b of r.raw_input_contents) {
    n += b.byteLength
  }
  for (const t of r.inputs) {
    for (const v of Object.values(t.contents ?? {})) {
      if (Array.isArray(v)) {
        for (const x of v as unknown[]) {
          n += x instanceof Uint8Array ? x.byteLength : 8
        }
      }
    }
  }
  return n
}

/** The absolute time (ms since the epoch) of a gRPC deadline; undefined when it has none. */
export function deadlineAt(deadline: grpc.Deadline | undefined): number | undefined {
  if (deadline === undefined || deadline === Infinity) {
    return undefined
  }
  return deadline instanceof Date ? deadline.getTime() : deadline
}

/**
 * One `ModelInfer`, a codec over the inference door: inputs from raw or typed contents; the
 * deadline is the smallest of the server's, the `timeout` parameter (µs) and the call's gRPC
 * deadline (the passage's arrival); outputs as `raw_output_contents` in the requested (else the
 * model's) order. A request with an `id` (or `idempotency-key` metadata) may be resent on worker loss.
 */
export async function modelInfer(p: Passage, r: ModelInferRequestMsg, signal: AbortSignal, idempotent: boolean): Promise<Record<string, unknown>> {
  const model = r.model_name
  const version = r.model_version === '' ? undefined : r.model_version
  const { tensors } = grpcInputs(r.inputs, r.raw_input_contents)
  const priority = paramValue(r.parameters['priority'])
  const outputs = r.outputs.map((o) => o.name)
  const reply = await p.infer(
    {
      tensors,
      ...(typeof priority === 'number' ? { priority } : {}),
      ...(outputs.length > 0 ? { outputs } : {}),
      ...(version !== undefined ? { version } : {}),
    },
    { timeoutMs: p.timeoutMs(paramValue(r.parameters['timeout'])), signal, retryable: idempotent || r.id !== '' },
  )
  const out = reply.tensors ?? {}
  const order = outputs.length > 0 ? outputs : Object.keys(out)
  const res = {
    model_name: model,
    model_version: reply.version ?? version ?? '1',
    id: r.id,
    parameters: {},
    outputs: [] as { name: string; datatype: string; shape: number[] }[],
    raw_output_contents: [] as Uint8Array[],
  }
  for (const name of order) {
    const t = out[name]
    if (t) {
      res.outputs.push({ name, datatype: t.datatype, shape: t.shape })
      res.raw_output_contents.push(t.bytes)
    }
  }
  return res
}
