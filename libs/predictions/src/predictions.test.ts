import { describe, expect, it } from 'vitest'
import { decodePrediction, encodePrediction, finishPrediction, isTerminal, newPrediction, PREDICTION_ID_RE, wantsEvent } from './predictions.ts'
import { backoffMs } from './webhooks.ts'

describe('prediction records', () => {
  const p = newPrediction({ id: 'p1', model: 'm', input: { a: 1 }, webhook: 'http://h/x', webhookEventsFilter: ['completed'], now: new Date(0) })

  it('starts as Cog does and round-trips through storage', () => {
    expect(p).toEqual({
      id: 'p1',
      model: 'm',
      status: 'starting',
      input: { a: 1 },
      output: null,
      error: null,
      logs: '',
      created_at: '1970-01-01T00:00:00.000Z',
      started_at: null,
      completed_at: null,
      metrics: {},
      webhook: 'http://h/x',
      webhook_events_filter: ['completed'],
    })
    expect(decodePrediction(encodePrediction(p))).toEqual(p)
  })

  it('filters webhook events (all of them without a filter, none without a webhook)', () => {
    expect(wantsEvent(p, 'completed')).toBe(true)
    expect(wantsEvent(p, 'start')).toBe(false)
    const all = newPrediction({ id: 'p2', model: 'm', input: 1, webhook: 'http://h/x' })
    expect(['start', 'output', 'logs', 'completed'].every((e) => wantsEvent(all, e as 'start'))).toBe(true)
    expect(wantsEvent(newPrediction({ id: 'p3', model: 'm', input: 1 }), 'completed')).toBe(false)
  })

  it('finishes as succeeded, failed (with code) or canceled', () => {
    const ok = finishPrediction(p, { output: { y: 2 }, computeMs: 1500 }, new Date(1000))
    expect(ok).toMatchObject({ status: 'succeeded', output: { y: 2 }, error: null, metrics: { predict_time: 1.5 }, completed_at: '1970-01-01T00:00:01.000Z' })
    expect(ok.code).toBeUndefined()
    expect(finishPrediction(p, { error: { code: 'PREDICTOR_FAILED', message: 'boom' } })).toMatchObject({ status: 'failed', error: 'boom', code: 'PREDICTOR_FAILED', output: null })
    expect(finishPrediction(p, { error: { code: 'CANCELLED', message: 'gone' } }).status).toBe('canceled')
    expect(['succeeded', 'failed', 'canceled'].every((s) => isTerminal(s as 'failed'))).toBe(true)
    expect(isTerminal('processing') || isTerminal('starting')).toBe(false)
  })

  it('takes ids that are KV keys and URL path segments', () => {
    expect(PREDICTION_ID_RE.test('wjx3whax6rf4vphkegkhcvpv6a')).toBe(true)
    expect(PREDICTION_ID_RE.test('a.b')).toBe(false)
    expect(PREDICTION_ID_RE.test('x'.repeat(129))).toBe(false)
  })

  it('backs off exponentially up to a cap', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(n, 500, 3000))).toEqual([500, 1000, 2000, 3000, 3000])
  })
})
