import { describe, expect, it } from 'vitest'
import { NoRespondersError, RequestError, TimeoutError } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'
import { mapRequestError } from './request-errors.ts'

describe('mapRequestError: a failed NATS request as the CohortError its caller answers with', () => {
  it('no responders (bare, as a cause, or a RequestError saying so) is NO_WORKER naming the subject', () => {
    for (const e of [new NoRespondersError('cohort.infer.m'), new RequestError('request failed', { cause: new NoRespondersError('cohort.infer.m') })]) {
      const m = mapRequestError(e, 'cohort.infer.m', 100)
      expect(m.code).toBe('NO_WORKER')
      expect(m.message).toBe('no responders on cohort.infer.m')
      expect(m.cause).toBe(e)
    }
  })

  it('a timeout (bare or as a cause) is DEADLINE_EXCEEDED with the wait in whole ms', () => {
    for (const e of [new TimeoutError(), new RequestError('x', { cause: new TimeoutError() })]) {
      const m = mapRequestError(e, 'cohort.meta.m', 249.6)
      expect(m.code).toBe('DEADLINE_EXCEEDED')
      expect(m.message).toBe('no reply on cohort.meta.m within 250 ms')
    }
  })

  it("the server's max_payload refusal is PAYLOAD_TOO_LARGE; any other failure NO_WORKER", () => {
    expect(mapRequestError(new Error('MAX_PAYLOAD_EXCEEDED'), 's', 1).code).toBe('PAYLOAD_TOO_LARGE')
    const other = mapRequestError('connection closed', 's', 1)
    expect(other.code).toBe('NO_WORKER')
    expect(other.message).toBe('NATS request failed: connection closed')
  })

  it('a CohortError (REPLY_LOST, CANCELLED, a chunk transfer error) passes unchanged', () => {
    const e = new CohortError('REPLY_LOST', 'moved')
    expect(mapRequestError(e, 's', 1)).toBe(e)
  })
})
