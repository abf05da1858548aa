import { describe, expect, it } from 'vitest'
import { CliError } from './cli-error.ts'
import { createLogger } from './telemetry.ts'
import { logFormat, prettyDestination, prettyLine } from './log-format.ts'

describe('--log-format', () => {
  it('defaults to json, reads COHORT_LOG_FORMAT, and refuses other values by name', () => {
    expect(logFormat({}, {})).toBe('json')
    expect(logFormat({}, { COHORT_LOG_FORMAT: 'Pretty' })).toBe('pretty')
    expect(logFormat({ 'log-format': 'json' }, { COHORT_LOG_FORMAT: 'pretty' })).toBe('json')
    expect(() => logFormat({ 'log-format': 'xml' }, {})).toThrow(CliError)
    expect(() => logFormat({ 'log-format': 'xml' }, {})).toThrow(/--log-format must be json or pretty, got "xml"/)
  })

  it('pretty: one human line per record with time, level, component, message and fields', () => {
    const lines: string[] = []
    const logger = createLogger(
      'info',
      'cohort-test',
      prettyDestination((l) => void lines.push(l)),
    )
    logger.child({ component: 'worker' }).info({ models: ['demo'], ms: 51 }, 'worker started')
    logger.debug('not at info')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  \[worker\] worker started {2}models=\["demo"\] ms=51\n$/)
    expect(prettyLine('not json')).toBe('not json')
  })
})
