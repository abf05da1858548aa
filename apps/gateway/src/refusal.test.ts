// Cheap refusals: the aggregated refusal log on a fake clock (one `warn` line per interval, whatever
// the flood), and the connection rule of an answer given before the body was read.
import { describe, expect, it } from 'vitest'
import { FakeClock } from '@cohort/batching'
import { keptLogger } from '@cohort/test-support'
import { DEFAULT_REFUSAL_LOG_INTERVAL_MS, DRAIN_REFUSED_BYTES, RefusalLog, closesConnection } from './refusal.ts'

/** A logger that keeps its `warn` lines. */
function warnLines() {
  const k = keptLogger()
  return { logger: k.logger, lines: k.lines }
}

describe('RefusalLog (aggregated, at most one line per interval)', () => {
  it('the first refusal is logged at once; a flood of 10,000 within the interval adds nothing; the next line after it sums them by check', () => {
    expect(DEFAULT_REFUSAL_LOG_INTERVAL_MS).toBe(10_000)
    const clock = new FakeClock(1_000_000)
    const { logger, lines } = warnLines()
    const log = new RefusalLog(logger, { now: () => clock.now() })
    log.note('worker_wait', 'm')
    expect(lines).toHaveLength(1)
    expect(lines[0]!.fields).toMatchObject({ refused: 1, byCheck: { worker_wait: 1 } })
    for (let i = 0; i < 10_000; i++) {
      log.note(i % 2 === 0 ? 'worker_wait' : 'arrival_wait', 'm')
      clock.advance(0.9)
    }
    expect(lines).toHaveLength(1)
    clock.advance(1000)
    log.note('worker_wait', 'm')
    expect(lines).toHaveLength(2)
    expect(lines[1]!.fields).toMatchObject({ refused: 10_001, byCheck: { worker_wait: 5001, arrival_wait: 5000 } })
    expect(lines[1]!.fields['windowMs']).toBeGreaterThanOrEqual(10_000)
    expect(log.total).toBe(10_002)
  })

  it('interval 0 logs every refusal (the old behaviour, for debugging)', () => {
    const { logger, lines } = warnLines()
    const log = new RefusalLog(logger, { intervalMs: 0, now: () => 5 })
    for (let i = 0; i < 3; i++) log.note('worker_wait', 'm')
    expect(lines).toHaveLength(3)
  })
})

describe('the connection rule of an answer before the body is read', () => {
  it(`keeps the connection for no body or a body up to ${DRAIN_REFUSED_BYTES} bytes; closes it for a larger or chunked one`, () => {
    expect(closesConnection('GET', undefined, undefined)).toBe(false)
    expect(closesConnection('POST', undefined, undefined)).toBe(false)
    expect(closesConnection('POST', String(DRAIN_REFUSED_BYTES), undefined)).toBe(false)
    expect(closesConnection('POST', String(DRAIN_REFUSED_BYTES + 1), undefined)).toBe(true)
    expect(closesConnection('POST', undefined, 'chunked')).toBe(true)
    expect(closesConnection('PUT', 'x', undefined)).toBe(true)
  })
})
