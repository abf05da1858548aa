import { CohortError, concatRows, tensorToJson, type InferReply, type InferRequest, type ItemTiming, type WireError, type WireTensor } from '@cohort/protocol'
import { itemsToTensors } from '@cohort/predictor'
import type { TSchema } from '@sinclair/typebox'
import type { ItemResult } from './runners/types.ts'

function nest(flat: unknown[], dims: number[]): unknown {
  if (dims.length <= 1) {
    return flat
  }
  const [, ...rest] = dims
  const stride = rest.reduce((a, b) => a * b, 1)
  const out: unknown[] = []
  for (let i = 0; i < flat.length; i += stride) {
    out.push(nest(flat.slice(i, i + stride), rest))
  }
  return out
}

/** One row of output tensors as JSON: `{name: nested array without the batch dim}`. */
function rowToJson(tensors: Record<string, WireTensor>, wanted: string[] | undefined): Record<string, unknown> {
  const o: Record<string, unknown> = {}
  for (const [name, t] of Object.entries(tensors)) {
    if (!wanted || wanted.includes(name)) {
      const rest = t.shape.slice(1)
      const flat = tensorToJson(t)
      o[name] = rest.length === 0 ? flat[0] : nest(flat, rest)
    }
  }
  return o
}

/**
 * Assemble a request's reply from its items' results: batch-major tensors when the request
 * came as tensors, one JSON value per item when it came as items. Item errors go to `errors`.
 */
export function buildReply(req: InferRequest, results: ItemResult[], timing: ItemTiming[], worker: string, outputSchema: TSchema | undefined): InferReply {
  const reply: InferReply = { v: 1, id: req.id, worker, timing }
  const errors: (WireError | null)[] = results.map((r) => ('error' in r ? r.error : null))
  if (errors.some((e) => e !== null)) {
    reply.errors = errors
  }
  const wanted = req.outputs && req.outputs.length > 0 ? req.outputs : undefined
  if (req.tensors) {
    if (reply.errors) {
      return reply
    }
    if (results.every((r) => 'tensors' in r)) {
      const rows = results as { tensors: Record<string, WireTensor> }[]
      const names = Object.keys(rows[0]?.tensors ?? {})
      const out: Record<string, WireTensor> = {}
      for (const name of names) {
        if (!wanted || wanted.includes(name)) {
          out[name] = concatRows(rows.map((r) => rowOutput(r.tensors, name)))
        }
      }
      reply.tensors = out
    } else {
      const all = itemsToTensors(
        results.map((r) => ('json' in r ? r.json : null)),
        outputSchema,
      )
      reply.tensors = wanted ? Object.fromEntries(Object.entries(all).filter(([k]) => wanted.includes(k))) : all
    }
    return reply
  }
  reply.items = results.map((r) => {
    if ('json' in r) {
      return r.json
    }
    if ('tensors' in r) {
      return rowToJson(r.tensors, wanted)
    }
    return null
  })
  return reply
}

/** Check requested output names against a model's outputs (when known). */
export function checkRequestedOutputs(req: InferRequest, known: string[] | undefined, model: string): void {
  if (!known || !req.outputs) {
    return
  }
  for (const o of req.outputs) {
    if (!known.includes(o)) {
      throw new CohortError('INVALID_INPUT', `model "${model}" has no output "${o}" (outputs: ${known.join(', ')})`)
    }
  }
}

/** Output `name` of one row of a batch: every row comes from one run of one model, with the same outputs. */
function rowOutput(row: Record<string, WireTensor>, name: string): WireTensor {
  const t = row[name]
  if (t === undefined) {
    throw new CohortError('INTERNAL', `a batch row has no output "${name}"`)
  }
  return t
}
