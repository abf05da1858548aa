import { expect } from 'vitest'
import { CohortError } from '@cohort/protocol'

/** The CohortError a promise rejects with (fails the test when it resolves or rejects with anything else). */
export async function failure(p: Promise<unknown>): Promise<CohortError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  )
  expect(e).toBeInstanceOf(CohortError)
  return e as CohortError
}
