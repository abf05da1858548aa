import type { Static, TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { CohortError } from '@cohort/protocol'

/**
 * Apply schema defaults to one item and check it. Returns the completed item or throws
 * CohortError INVALID_INPUT naming the first failing path.
 */
export function validateItem<S extends TSchema>(schema: S, item: unknown, index = 0): Static<S> {
  const withDefaults = Value.Default(schema, Value.Clone(item))
  if (Value.Check(schema, withDefaults)) {
    return withDefaults
  }
  const first = Value.Errors(schema, withDefaults).First()
  const where = first?.path ? first.path : '/'
  const what = first?.message ?? 'does not match the input schema'
  throw new CohortError('INVALID_INPUT', `item ${index}: ${where}: ${what}`)
}
