import { describe, expect, it } from 'vitest'
import { logReplyRefusals } from './reply-refusals.ts'

describe('logReplyRefusals', () => {
  it('writes the first refusal at once, then at most one line per interval counting the rest', () => {
    const lines: string[] = []
    let t = 0
    const log = logReplyRefusals((l) => lines.push(l), { everyMs: 1_000, now: () => t })
    const r = { subject: 'cohort.meta.m', reply: '$KV.cohort-models.x', reason: 'reply subject is a system subject' }
    log(r)
    t = 500
    log(r)
    log(r)
    t = 1_200
    log({ ...r, subject: 'cohort.discover' })
    expect(lines).toEqual([
      'cohort: left a message on cohort.meta.m unanswered: reply subject is a system subject (reply subject "$KV.cohort-models.x")',
      'cohort: left a message on cohort.discover unanswered: reply subject is a system subject (reply subject "$KV.cohort-models.x"); 2 more refused since the last line',
    ])
  })
})
