import { Type, validateItem, type TSchema } from '@cohort/predictor'

type Json = Record<string, unknown>

/** Keywords copied onto rebuilt schemas (TypeBox passes them to its checker). */
const KEEP = [
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minItems',
  'maxItems',
  'uniqueItems',
  'additionalProperties',
  'default',
  'enum',
]

function opts(s: Json): Json {
  const o: Json = {}
  for (const k of KEEP) {
    if (s[k] !== undefined && (k !== 'additionalProperties' || typeof s[k] === 'boolean')) {
      o[k] = s[k]
    }
  }
  return o
}

/**
 * Rebuild a TypeBox schema from a predictor's input schema as it crossed the bus (plain JSON
 * Schema: TypeBox's kind markers do not survive serialization). Keywords it does not know become
 * `Any`, so the result accepts at least what the worker accepts; the worker checks again.
 */
export function fromJsonSchema(s: unknown): TSchema {
  if (typeof s !== 'object' || s === null) {
    return Type.Any()
  }
  const j = s as Json
  if (j['const'] !== undefined && ['string', 'number', 'boolean'].includes(typeof j['const'])) {
    return Type.Literal(j['const'] as string | number | boolean)
  }
  if (Array.isArray(j['anyOf'])) {
    return Type.Union(j['anyOf'].map(fromJsonSchema))
  }
  if (Array.isArray(j['enum'])) {
    return Type.Any() // enums are checked by the worker
  }
  switch (j['type']) {
    case 'object': {
      const props = (j['properties'] ?? {}) as Record<string, unknown>
      const required = new Set(Array.isArray(j['required']) ? (j['required'] as string[]) : [])
      const out: Record<string, TSchema> = {}
      for (const [k, v] of Object.entries(props)) {
        out[k] = required.has(k) ? fromJsonSchema(v) : Type.Optional(fromJsonSchema(v))
      }
      return Type.Object(out, opts(j))
    }
    case 'array':
      return Type.Array(fromJsonSchema(j['items']), opts(j))
    case 'string':
      return Type.String(opts(j))
    case 'number':
      return Type.Number(opts(j))
    case 'integer':
      return Type.Integer(opts(j))
    case 'boolean':
      return Type.Boolean(opts(j))
    case 'null':
      return Type.Null()
    default:
      return Type.Any()
  }
}

const cache = new WeakMap<object, TSchema>()

/** Check one input against a predictor's plain input schema; throws INVALID_INPUT like the worker. */
export function checkInput(schema: unknown, input: unknown): void {
  if (typeof schema !== 'object' || schema === null) {
    return
  }
  let t = cache.get(schema)
  if (!t) {
    t = fromJsonSchema(schema)
    cache.set(schema, t)
  }
  validateItem(t, input)
}
