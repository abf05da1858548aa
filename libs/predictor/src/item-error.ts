import type { ErrorCode } from '@cohort/protocol'

/** A failure of one item, returned (not thrown) from `predict` in that item's place. */
export class ItemError extends Error {
  override name = 'ItemError'
  constructor(
    message: string,
    readonly code: ErrorCode = 'PREDICTOR_FAILED',
  ) {
    super(message)
  }
}

/** Fail one item: `return inputs.map((x) => (ok(x) ? run(x) : itemError('bad x', 'INVALID_INPUT')))`. */
export function itemError(message: string, code: ErrorCode = 'PREDICTOR_FAILED'): ItemError {
  return new ItemError(message, code)
}
