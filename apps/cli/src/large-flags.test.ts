import { describe, expect, it } from 'vitest'
import { bodyLimit, largeMessageOptions } from './large-flags.ts'

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
