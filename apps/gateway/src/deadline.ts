import { CohortError } from '@cohort/protocol'

/**
 * The request's timeout in ms: the server limit, shortened by `parameters.timeout` (microseconds,
 * as Triton) or the `x-cohort-timeout-ms` header, never extended.
 */
export function effectiveTimeoutMs(serverMs: number, header: string | undefined, paramUs: unknown): number {
  let t = serverMs
  if (header !== undefined && header !== '') {
    const ms = Number(header)
    if (!Number.isFinite(ms) || ms <= 0) {
      throw new CohortError('BAD_REQUEST', `x-cohort-timeout-ms must be a positive number of milliseconds, got "${header}"`)
    }
    t = Math.min(t, ms)
  }
  if (paramUs !== undefined) {
    if (typeof paramUs !== 'number' || !Number.isFinite(paramUs) || paramUs < 0) {
      throw new CohortError('BAD_REQUEST', 'parameters.timeout must be a non-negative number of microseconds')
    }
    if (paramUs > 0) {
      t = Math.min(t, paramUs / 1000)
    }
  }
  return t
}
