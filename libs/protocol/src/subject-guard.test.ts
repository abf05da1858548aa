import { describe, expect, it } from 'vitest'
import { isAcceptSubject, isBlobSubject, isInboxSubject } from './subject-guard.ts'
import { subjects } from './subjects.ts'

describe('subject guard (no confused deputy)', () => {
  const s = subjects('cohort')

  it('accepts acceptance subjects of the own prefix only', () => {
    expect(isAcceptSubject(s.accept, 'cohort.accept.g-1234abcd')).toBe(true)
    expect(isAcceptSubject(s.accept, s.accept('gw_1.zone-a'))).toBe(true)
    for (const bad of [
      '$KV.cohort-models.nope',
      'cohort.accept',
      'cohort.accept.',
      'cohort.accept.*',
      'cohort.accept.>',
      'cohort.accept..x',
      'other.accept.g-1',
      'cohort.heartbeat',
      'cohort.accept.g 1',
      `cohort.accept.${'a'.repeat(300)}`,
      undefined,
      42,
    ]) {
      expect(isAcceptSubject(s.accept, bad), String(bad)).toBe(false)
    }
    expect(isAcceptSubject(subjects('tenant').accept, 'cohort.accept.g-1')).toBe(false)
  })

  it('accepts chunk subjects <prefix>.<nuid>.<id> only', () => {
    expect(isBlobSubject('cohort.blob', 'cohort.blob.ABCDEF0123.b1')).toBe(true)
    for (const bad of ['$KV.cohort-models.nope', 'cohort.blob.x', 'cohort.blob.x.y.z', 'cohort.blob.*.b1', 'cohort.blob.>', 'cohort.blobx.a.b', '$KV.cohort-models.a.b']) {
      expect(isBlobSubject('cohort.blob', bad), bad).toBe(false)
    }
  })

  it('accepts reply inboxes only', () => {
    expect(isInboxSubject('_INBOX.AbC123.42')).toBe(true)
    expect(isInboxSubject('_INBOX.x', 'my_inbox')).toBe(false)
    expect(isInboxSubject('my_inbox.x', 'my_inbox')).toBe(true)
    for (const bad of ['$KV.cohort-models.nope', '_INBOX', '_INBOX.', '_INBOX.>', '_INBOX.*', '$JS.ACK.x', undefined, '']) {
      expect(isInboxSubject(bad), String(bad)).toBe(false)
    }
  })
})
