import type { TSchema } from '@sinclair/typebox'
import { CohortError, jsonToTensor, tensorToJson, type Datatype, type TensorMeta, type WireTensor } from '@cohort/protocol'

interface JsonSchemaLike {
  type?: string | string[]
  items?: JsonSchemaLike
  properties?: Record<string, JsonSchemaLike>
}

/** Datatype and rank of a JSON Schema node when it is carried as a tensor column. */
function columnType(s: JsonSchemaLike | undefined): { datatype: Datatype; rank: number } {
  let rank = 0
  let node = s
  while (node?.type === 'array' && node.items) {
    rank++
    node = node.items
  }
  switch (node?.type) {
    case 'integer':
      return { datatype: 'INT64', rank }
    case 'number':
      return { datatype: 'FP64', rank }
    case 'boolean':
      return { datatype: 'BOOL', rank }
    default:
      return { datatype: 'BYTES', rank }
  }
}

/**
 * Open Inference Protocol tensor descriptions of an object schema's properties: each property
 * is a column whose first dim is the item count.
 */
export function schemaToTensorMeta(schema: TSchema | undefined, fallbackName: string): TensorMeta[] {
  const s = schema as JsonSchemaLike | undefined
  if (s?.type === 'object' && s.properties) {
    return Object.entries(s.properties).map(([name, p]) => {
      const { datatype, rank } = columnType(p)
      return { name, datatype, shape: [-1, ...new Array<number>(rank).fill(-1)] }
    })
  }
  const { datatype, rank } = columnType(s)
  return [{ name: fallbackName, datatype: s ? datatype : 'BYTES', shape: [-1, ...new Array<number>(rank).fill(-1)] }]
}

function nest(flat: unknown[], shape: number[]): unknown {
  if (shape.length <= 1) {
    return flat
  }
  const [, ...rest] = shape
  const stride = rest.reduce((a, b) => a * b, 1)
  const out: unknown[] = []
  for (let i = 0; i < flat.length; i += stride) {
    out.push(nest(flat.slice(i, i + stride), rest))
  }
  return out
}

/**
 * Turn batch-major input tensors into one JSON object per row (OIP infer on a schema predictor):
 * a tensor of shape [N] gives scalars, [N, ...] gives nested arrays; BYTES become strings.
 */
export function tensorsToItems(tensors: Record<string, WireTensor>, count: number): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = Array.from({ length: count }, () => ({}))
  for (const [name, t] of Object.entries(tensors)) {
    const flat = tensorToJson(t)
    const rest = t.shape.slice(1)
    const stride = rest.reduce((a, b) => a * b, 1)
    for (let i = 0; i < count; i++) {
      const row = flat.slice(i * stride, (i + 1) * stride)
      const item = items[i] as Record<string, unknown>
      item[name] = rest.length === 0 ? row[0] : nest(row, rest)
    }
  }
  return items
}

function shapeOf(v: unknown): number[] | undefined {
  if (!Array.isArray(v)) {
    return []
  }
  if (v.length === 0) {
    return [0]
  }
  const inner = shapeOf(v[0])
  if (!inner) {
    return undefined
  }
  for (const x of v) {
    const s = shapeOf(x)
    if (!s || s.length !== inner.length || s.some((d, i) => d !== inner[i])) {
      return undefined
    }
  }
  return [v.length, ...inner]
}

function leafType(v: unknown): 'number' | 'integer' | 'boolean' | 'string' | 'other' {
  let x = v
  while (Array.isArray(x)) {
    x = x[0]
  }
  if (typeof x === 'number') {
    return Number.isSafeInteger(x) ? 'integer' : 'number'
  }
  return typeof x === 'boolean' ? 'boolean' : typeof x === 'string' ? 'string' : 'other'
}

/**
 * Turn one JSON output per item into batch-major tensors (OIP response of a schema predictor).
 * Object outputs give one tensor per property; other outputs give one tensor named `output`.
 * Numbers are FP64 (INT64 when the schema says integer, or all values are integers),
 * booleans BOOL, strings BYTES; values that are not rectangular arrays travel as JSON text (BYTES).
 */
export function itemsToTensors(outputs: unknown[], schema?: TSchema): Record<string, WireTensor> {
  const s = schema as JsonSchemaLike | undefined
  const isObj = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v)
  const columns: Record<string, unknown[]> = {}
  if (outputs.length > 0 && outputs.every(isObj)) {
    // The union of keys: an item without a key gets null there (and the column travels as JSON text).
    const keys = new Set<string>()
    for (const o of outputs) {
      for (const k of Object.keys(o as object)) {
        keys.add(k)
      }
    }
    for (const k of keys) {
      columns[k] = outputs.map((o) => (o as Record<string, unknown>)[k] ?? null)
    }
  } else {
    columns['output'] = outputs
  }
  const out: Record<string, WireTensor> = {}
  for (const [name, values] of Object.entries(columns)) {
    const declared = s?.properties?.[name] ?? (name === 'output' ? s : undefined)
    const shape = shapeOf(values)
    const kinds = new Set(values.map(leafType))
    let datatype: Datatype | undefined
    if (shape && kinds.size >= 1 && ![...kinds].some((k) => k === 'other')) {
      const decl = declared ? columnType(declared).datatype : undefined
      if (kinds.has('string')) {
        datatype = kinds.size === 1 ? 'BYTES' : undefined
      } else if (kinds.has('boolean')) {
        datatype = kinds.size === 1 ? 'BOOL' : undefined
      } else if (decl === 'FP64' || kinds.has('number')) {
        datatype = 'FP64'
      } else {
        datatype = 'INT64'
      }
    }
    if (datatype && shape) {
      out[name] = jsonToTensor(name, datatype, shape, values)
    } else {
      out[name] = jsonToTensor(
        name,
        'BYTES',
        [values.length],
        // JSON.stringify answers undefined (not a string) for these: they travel as null.
        values.map((v) => (v === undefined || typeof v === 'function' || typeof v === 'symbol' ? 'null' : JSON.stringify(v))),
      )
    }
  }
  return out
}

/** Guard for item counts that disagree. */
export function assertCount(what: string, got: number, want: number): void {
  if (got !== want) {
    throw new CohortError('INTERNAL', `${what}: expected ${want} values, got ${got}`)
  }
}
