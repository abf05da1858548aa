import { BATCHING_FIELDS, BATCHING_KEYS } from '@cohort/batching'
import type { ModelMeta } from '@cohort/protocol'

const TRITON_TYPE: Record<string, string> = {
  BOOL: 'TYPE_BOOL',
  UINT8: 'TYPE_UINT8',
  UINT16: 'TYPE_UINT16',
  UINT32: 'TYPE_UINT32',
  UINT64: 'TYPE_UINT64',
  INT8: 'TYPE_INT8',
  INT16: 'TYPE_INT16',
  INT32: 'TYPE_INT32',
  INT64: 'TYPE_INT64',
  FP16: 'TYPE_FP16',
  FP32: 'TYPE_FP32',
  FP64: 'TYPE_FP64',
  BYTES: 'TYPE_STRING',
}

const sv = (v: unknown) => ({ string_value: String(v) })

/**
 * Triton's model configuration (`GET /v2/models/{m}/config`): `max_batch_size`, `input`/`output`
 * without the batch dim, `dynamic_batching`, and Cohort's live settings under `parameters` (with
 * `cohort_source_<field>`: the layer each value came from).
 */
export function tritonConfig(m: ModelMeta): Record<string, unknown> {
  const tensor = (t: { name: string; datatype: string; shape: number[] }) => ({
    name: t.name,
    data_type: TRITON_TYPE[t.datatype] ?? `TYPE_${t.datatype}`,
    dims: t.shape.slice(1),
  })
  const parameters: Record<string, { string_value: string }> = { cohort_kind: sv(m.kind) }
  // Every batching field the table shows here (`@cohort/batching`), when the worker reported it.
  for (const k of BATCHING_KEYS) {
    const name = BATCHING_FIELDS[k].tritonParameter
    const v = (m as Partial<Record<typeof k, unknown>>)[k]
    if (name && v !== undefined && v !== null) {
      parameters[name] = sv(v)
    }
  }
  // Where each live value came from (default < model < file < flags < runtime), when reported.
  for (const [k, src] of Object.entries(m.configSources ?? {})) {
    parameters[`cohort_source_${k}`] = sv(src)
  }
  if (m.batchLimit) {
    parameters['cohort_batch_limit'] = sv(m.batchLimit.maxBatchSize)
    parameters['cohort_batch_limit_reason'] = sv(m.batchLimit.reason)
  }
  if (m.cost) {
    parameters['cohort_cost_a_ms'] = sv(m.cost.a)
    parameters['cohort_cost_c_ms'] = sv(m.cost.c)
    parameters['cohort_cost_samples'] = sv(m.cost.samples)
  }
  return {
    name: m.name,
    // The metadata's platform (GET /v2/models/{m}), so both routes name the same one.
    platform: m.platform,
    backend: m.kind === 'onnx' ? 'onnxruntime' : 'cohort',
    max_batch_size: m.maxBatchSize,
    input: m.inputs.map(tensor),
    output: m.outputs.map(tensor),
    dynamic_batching: {
      // The longest a request waits for company: eager never waits (it dispatches when an executor
      // is free); timer and deadline wait up to maxDelayMs (cohort_max_delay_ms below either way).
      max_queue_delay_microseconds: (m.policy ?? 'eager') === 'eager' ? 0 : Math.round(m.maxDelayMs * 1000),
      preferred_batch_size: [],
    },
    parameters,
  }
}
