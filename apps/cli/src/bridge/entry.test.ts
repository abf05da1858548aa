import { describe, expect, it } from 'vitest'
import { CohortError } from '@cohort/protocol'
import { finishPrediction, newPrediction } from '@cohort/predictions'
import { fieldMap, isTransient, parseEntry, resultFields } from './entry.ts'

describe('Redis bridge entries', () => {
  it('reads id, model, input (JSON) and webhook', () => {
    const e = parseEntry('1-0', ['id', 'p1', 'model', 'sleepy', 'input', '{"x":3}', 'webhook', 'http://127.0.0.1:9/h'])
    expect(e).toEqual({ id: 'p1', model: 'sleepy', input: { x: 3 }, webhook: 'http://127.0.0.1:9/h' })
  })

  it('keeps the first of a repeated field', () => {
    expect(fieldMap(['a', '1', 'a', '2', 'b'])).toEqual(new Map([['a', '1']]))
  })

  it('fails bad entries with BAD_REQUEST, naming every problem, under the stream id when the id is unusable', () => {
    const e = parseEntry('1700000000000-3', ['model', 'no/such', 'input', '{x'])
    expect(e.id).toBe('1700000000000-3')
    expect(e.error).toBeInstanceOf(CohortError)
    expect(e.error!.code).toBe('BAD_REQUEST')
    expect(e.error!.message).toMatch(/"id" is missing/)
    expect(e.error!.message).toMatch(/not a valid model name/)
    expect(e.error!.message).toMatch(/"input" is not JSON/)
    const bad = parseEntry('2-0', ['id', 'a b', 'model', 'm', 'input', '1', 'webhook', 'ftp://x'])
    expect(bad.id).toBe('2-0')
    expect(bad.error!.message).toMatch(/"id" must match/)
    expect(bad.error!.message).toMatch(/webhook/)
    expect(parseEntry('3-0', ['id', 'ok', 'model', 'm']).error!.message).toMatch(/"input" is missing/)
  })

  it('writes the prediction and its id, model and status as result fields', () => {
    const p = finishPrediction(newPrediction({ id: 'p1', model: 'm', input: 1 }), { output: { y: 2 } })
    const f = fieldMap(resultFields(p))
    expect(f.get('status')).toBe('succeeded')
    expect(JSON.parse(f.get('prediction')!)).toEqual(p)
  })

  it('retries only errors after which the item did not run', () => {
    expect(isTransient(new CohortError('NO_WORKER', 'x'))).toBe(true)
    expect(isTransient(new CohortError('OVERLOADED', 'x'))).toBe(true)
    expect(isTransient(new CohortError('INVALID_INPUT', 'x'))).toBe(false)
    expect(isTransient(new CohortError('MODEL_NOT_FOUND', 'x'))).toBe(false)
    expect(isTransient(new Error('x'))).toBe(false)
  })
})
