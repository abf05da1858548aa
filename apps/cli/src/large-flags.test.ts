import { describe, expect, it } from 'vitest'
import { DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_INFLIGHT_REQUESTS, DEFAULT_MAX_MESSAGE_BYTES } from '@cohort/transport'
import { parse } from './args.ts'
import { LARGE_HELP, LARGE_OPTIONS, bodyLimit, largeMessageOptions } from './large-flags.ts'

describe('--max-message-bytes (alias --max-request-bytes)', () => {
  it('sets the NATS transport bound and, without --max-body-bytes, the gateway body limit', () => {
    expect(largeMessageOptions({ 'max-message-bytes': '8388608' })).toEqual({ maxMessageBytes: 8_388_608 })
    expect(bodyLimit({ 'max-message-bytes': '8388608' })).toEqual({ maxBodyBytes: 8_388_608 })
  })

  it('keeps the old name --max-request-bytes working as an alias', () => {
    expect(largeMessageOptions({ 'max-request-bytes': '8388608' })).toEqual({ maxMessageBytes: 8_388_608 })
    expect(bodyLimit({ 'max-request-bytes': '8388608' })).toEqual({ maxBodyBytes: 8_388_608 })
    expect(largeMessageOptions({ 'max-request-bytes': '1024', 'max-message-bytes': '1024' })).toEqual({ maxMessageBytes: 1024 })
    expect(() => largeMessageOptions({ 'max-request-bytes': '1024', 'max-message-bytes': '2048' })).toThrow(/disagree/)
  })

  it('leaves the body limit to --max-body-bytes when both are given, and the defaults when neither is', () => {
    expect(bodyLimit({ 'max-message-bytes': '8388608', 'max-body-bytes': '1024' })).toEqual({})
    expect(largeMessageOptions({})).toEqual({})
    expect(bodyLimit({})).toEqual({})
  })

  it('passes --max-inflight-requests / --max-inflight-bytes to both the gateway and the transport', () => {
    const v = { 'max-inflight-requests': '8', 'max-inflight-bytes': '1048576' }
    expect(bodyLimit(v)).toEqual({ inflight: { maxRequests: 8, maxBytes: 1_048_576 } })
    expect(largeMessageOptions(v)).toEqual({ inflight: { maxRequests: 8, maxBytes: 1_048_576 } })
    expect(largeMessageOptions({ 'max-inflight-bytes': '10' })).toEqual({ inflight: { maxBytes: 10 } })
    expect(() => bodyLimit({ 'max-inflight-requests': '0x10' })).toThrow(/--max-inflight-requests/)
  })

  it('rejects a value that is not a positive integer', () => {
    expect(() => largeMessageOptions({ 'max-message-bytes': '0' })).toThrow(/--max-message-bytes/)
    expect(() => largeMessageOptions({ 'max-request-bytes': '1.5' })).toThrow(/--max-request-bytes/)
  })
})

describe('the large-message knob table', () => {
  it('help defaults are the transport constants; the alias is named', () => {
    expect(LARGE_HELP).toContain(`(default ${DEFAULT_MAX_MESSAGE_BYTES}, 64 MiB)`)
    expect(LARGE_HELP).toContain(`(default ${DEFAULT_MAX_INFLIGHT_REQUESTS})`)
    expect(LARGE_HELP).toContain(`(default ${DEFAULT_MAX_INFLIGHT_BYTES}, 256 MiB;`)
    expect(LARGE_HELP).toContain('Alias: --max-request-bytes')
    expect(Object.keys(LARGE_OPTIONS).sort()).toEqual(['max-inflight-bytes', 'max-inflight-requests', 'max-message-bytes', 'max-request-bytes'])
  })

  it('unknown flags are refused by the parser; out-of-bound values name the flag', () => {
    expect(() => parse(['--max-inflight-request', '3'], LARGE_OPTIONS)).toThrow(/unknown option --max-inflight-request/)
    expect(() => largeMessageOptions(parse(['--max-inflight-bytes=0'], LARGE_OPTIONS).values)).toThrow(/--max-inflight-bytes must be an integer >= 1/)
  })
})
