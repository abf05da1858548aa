import { describe, expect, it } from 'vitest'
import { answerError, CohortError, ERROR_CODES, cohortError, fromWire, isErrorCode, statusOf, toWireError } from './errors.ts'

describe('errors', () => {
  it('answerError: a CohortError with no stack frames, the stack limit left as it was', () => {
    const before = (Error as { stackTraceLimit?: number }).stackTraceLimit
    const e = answerError('OVERLOADED', 'refused', { retryAfterS: 2 })
    expect(e).toBeInstanceOf(CohortError)
    expect([e.code, e.status, e.retryAfterS, e.message]).toEqual(['OVERLOADED', 503, 2, 'refused'])
    expect(e.stack?.split('\n').filter((l) => l.trim().startsWith('at '))).toEqual([])
    expect(new CohortError('OVERLOADED', 'with a stack').stack).toMatch(/\n\s+at /)
    expect((Error as { stackTraceLimit?: number }).stackTraceLimit).toBe(before)
  })

  it('maps codes to HTTP statuses', () => {
    expect(statusOf('BAD_REQUEST')).toBe(400)
    expect(statusOf('PAYLOAD_TOO_LARGE')).toBe(413)
    expect(statusOf('CANCELLED')).toBe(499)
    expect(statusOf('OVERLOADED')).toBe(503)
    expect(statusOf('DEADLINE_EXCEEDED')).toBe(504)
    expect(statusOf('NO_SUCH_CODE')).toBe(500)
    expect(statusOf('toString')).toBe(500)
    expect(isErrorCode('constructor')).toBe(false)
    for (const [code, { status }] of Object.entries(ERROR_CODES)) expect(statusOf(code)).toBe(status)
  })

  it('carries code, status and Retry-After', () => {
    const e = cohortError('OVERLOADED', 'queue full', { retryAfterS: 2 })
    expect(e).toBeInstanceOf(CohortError)
    expect(e).toBeInstanceOf(Error)
    expect(e.name).toBe('CohortError')
    expect(e).toMatchObject({ code: 'OVERLOADED', status: 503, retryAfterS: 2, message: 'queue full' })
    expect(new CohortError('INTERNAL', 'x').retryAfterS).toBeUndefined()
    expect(e.toWire()).toEqual({ code: 'OVERLOADED', message: 'queue full', retryAfterS: 2 })
    expect(fromWire(e.toWire())).toMatchObject({ code: 'OVERLOADED', retryAfterS: 2 })
    expect(new CohortError('INTERNAL', 'x').toWire()).toEqual({ code: 'INTERNAL', message: 'x' })
  })

  it('converts to and from the wire form', () => {
    const back = fromWire({ code: 'MODEL_NOT_FOUND', message: 'no model "x"' })
    expect(back).toBeInstanceOf(CohortError)
    expect(back).toMatchObject({ code: 'MODEL_NOT_FOUND', status: 404, message: 'no model "x"' })
    expect(fromWire({ code: 'WEIRD', message: 'm' })).toMatchObject({ code: 'INTERNAL', status: 500, message: 'm' })
    expect(fromWire({ code: 'BAD_REQUEST', message: 5 as unknown as string }).message).toBe('5')
    expect(toWireError(new CohortError('RATE_LIMITED', 'slow down'))).toEqual({ code: 'RATE_LIMITED', message: 'slow down' })
    expect(toWireError(new TypeError('oops'))).toEqual({ code: 'INTERNAL', message: 'oops' })
    expect(toWireError('plain', 'PREDICTOR_FAILED')).toEqual({ code: 'PREDICTOR_FAILED', message: 'plain' })
    expect(toWireError(new CohortError('CANCELLED', 'gone'), 'PREDICTOR_FAILED').code).toBe('CANCELLED')
    expect(fromWire(toWireError(new CohortError('NOT_READY', 'loading')))).toMatchObject({ code: 'NOT_READY', status: 503 })
  })
})
