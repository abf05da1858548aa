// The gRPC status of every refusal, as Triton answers the same condition (capacity:
// RESOURCE_EXHAUSTED; no or lost server: UNAVAILABLE; a passed deadline: DEADLINE_EXCEEDED).
import { describe, expect, it } from 'vitest'
import { status } from '@grpc/grpc-js'
import { CohortError, ERROR_CODES } from '@cohort/protocol'
import { grpcStatusOf, toServiceError } from './status.ts'

const of = (code: keyof typeof ERROR_CODES) => grpcStatusOf(new CohortError(code, 'x'))

describe('gRPC status of refusals (as Triton)', () => {
  it('OVERLOADED (queue full, admission, either door check) and RATE_LIMITED are RESOURCE_EXHAUSTED', () => {
    expect(of('OVERLOADED')).toBe(status.RESOURCE_EXHAUSTED)
    expect(of('RATE_LIMITED')).toBe(status.RESOURCE_EXHAUSTED)
  })

  it('no worker, a lost worker or reply, draining and loading are UNAVAILABLE', () => {
    for (const c of ['NO_WORKER', 'WORKER_LOST', 'REPLY_LOST', 'SHUTTING_DOWN', 'NOT_READY'] as const) {
      expect([c, of(c)]).toEqual([c, status.UNAVAILABLE])
    }
  })

  it('DEADLINE_EXCEEDED is DEADLINE_EXCEEDED; a request that can never fit (TOO_MANY_ITEMS, 413) is INVALID_ARGUMENT', () => {
    expect(of('DEADLINE_EXCEEDED')).toBe(status.DEADLINE_EXCEEDED)
    expect(of('TOO_MANY_ITEMS')).toBe(status.INVALID_ARGUMENT)
    expect(of('PAYLOAD_TOO_LARGE')).toBe(status.INVALID_ARGUMENT)
  })

  it('every registered code maps to a status other than OK or UNKNOWN, and the error carries cohort-code and retry-after', () => {
    for (const c of Object.keys(ERROR_CODES) as (keyof typeof ERROR_CODES)[]) {
      expect([c, of(c)]).not.toEqual([c, status.OK])
      expect([c, of(c)]).not.toEqual([c, status.UNKNOWN])
    }
    const se = toServiceError(new CohortError('OVERLOADED', 'full', { retryAfterS: 2.2 }), () => undefined)
    expect(se.code).toBe(status.RESOURCE_EXHAUSTED)
    expect(se.metadata?.get('cohort-code')).toEqual(['OVERLOADED'])
    expect(se.metadata?.get('retry-after')).toEqual(['3'])
  })
})
