// --subject-prefix: checked before anything connects (a bad prefix is a CLI error naming the flag,
// not a RangeError from deep inside the transport), and absent means the library default.
import { describe, expect, it } from 'vitest'
import { CliError } from './cli-error.ts'
import { prefixOption, subjectPrefix } from './prefix-flags.ts'

describe('--subject-prefix', () => {
  it('passes a NATS-token-safe prefix through, dotted ones included', () => {
    expect(subjectPrefix({ 'subject-prefix': 'staging' })).toBe('staging')
    expect(prefixOption({ 'subject-prefix': 'team-a.prod' })).toEqual({ subjectPrefix: 'team-a.prod' })
  })

  it('gives nothing when absent, so every component keeps its default prefix', () => {
    expect(subjectPrefix({})).toBeUndefined()
    expect(prefixOption({})).toEqual({})
  })

  it.each(['a*b', 'a.>', 'a b', '', 'a..b', '.a'])('refuses %j with a CliError naming the flag', (p) => {
    expect(() => subjectPrefix({ 'subject-prefix': p })).toThrow(CliError)
    expect(() => subjectPrefix({ 'subject-prefix': p })).toThrow(/--subject-prefix/)
  })
})
