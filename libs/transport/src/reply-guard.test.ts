import { createHash, randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { ReplyGuard, isAckOf, newReplyKey, replyKeyId } from './reply-guard.ts'
import { sha256 } from './sha256.ts'

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')

describe('sha256', () => {
  it.each(['', 'abc', 'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq', 'a'.repeat(55), 'a'.repeat(56), 'a'.repeat(64), 'a'.repeat(1000)])(
    'equals node:crypto for %j',
    (s) => {
      expect(hex(sha256(new TextEncoder().encode(s)))).toBe(createHash('sha256').update(s).digest('hex'))
    },
  )

  it('equals node:crypto on random inputs of every length up to 200 bytes', () => {
    for (let n = 0; n <= 200; n++) {
      const b = randomBytes(n)
      expect(hex(sha256(b)), `length ${n}`).toBe(createHash('sha256').update(b).digest('hex'))
    }
  })
})

describe('ReplyGuard: a responder answers only a reply subject that belongs to the asker', () => {
  const guard = new ReplyGuard()
  const nuid = 'AbCdEfGhIjKlMnOpQrStUv' // 22 characters, as nats.js makes them
  const gw = newReplyKey()
  const other = newReplyKey()
  const pack = `cohort.gw.g-1.${gw.id}.0`

  it("accepts the asker's inboxes: a request's, a muxed request's, a watch subject", () => {
    for (const cls of ['inbox', 'pack'] as const) {
      expect(guard.refusal(`_INBOX.${nuid}`, cls)).toBeUndefined()
      expect(guard.refusal(`_INBOX.${nuid}.42`, cls)).toBeUndefined()
      expect(guard.refusal(`_INBOX.${nuid}.x_y-1`, cls)).toBeUndefined()
    }
    expect(guard.refusal(undefined)).toBeUndefined()
  })

  it('accepts a gateway inbox on pack subscriptions only, and only with the key it was made from', () => {
    expect(guard.refusal(pack, 'pack', gw.key)).toBeUndefined()
    expect(guard.refusal(pack, 'pack')).toMatch(/does not carry the reply key/)
    expect(guard.refusal(pack, 'pack', other.key)).toMatch(/does not carry the reply key/)
    expect(guard.refusal(pack, 'pack', 'x'.repeat(43))).toMatch(/does not carry the reply key/)
    // Metadata, discovery, $SRV, repository, chunk requests: never into a gateway inbox.
    expect(guard.refusal(pack, 'inbox', gw.key)).toMatch(/answers packs only/)
    // Another gateway's inbox named by an attacker who knows its id (it is in every subject) but not its key.
    expect(guard.refusal(`cohort.gw.victim.${gw.id}.7`, 'pack', other.key)).toMatch(/does not carry the reply key/)
    expect(guard.refusal(`cohort.gw.g-1.${gw.id}`, 'pack', gw.key)).toMatch(/not a gateway inbox/)
    expect(guard.refusal(`cohort.gw.g-1.${gw.id}.0.extra`, 'pack', gw.key)).toMatch(/not a gateway inbox/)
  })

  // One target class per row: what a requester would like a responder to write for it.
  const targets: [string, string][] = [
    ['a KV key ($KV)', '$KV.cohort-models.planted'],
    ['a JetStream ack ($JS.ACK)', '$JS.ACK.COHORT_JOBS.jobs-sleepy.1.5.5.1700000000000000000.0'],
    ['the JetStream API ($JS.API)', '$JS.API.STREAM.PURGE.KV_cohort-models'],
    ['the system account ($SYS)', '$SYS.REQ.SERVER.PING'],
    ['the services protocol ($SRV)', '$SRV.PING'],
    ["another deployment's gateway inbox", `other.gw.g-1.${gw.id}.0`],
    ["another deployment's subject", 'other.infer.sleepy'],
    ['a request subject of this deployment', 'cohort.infer.sleepy'],
    ['an inbox with too many tokens', `_INBOX.${nuid}.1.2`],
    ['an inbox with a short first token', '_INBOX.x.1'],
    ['an inbox with a wildcard', `_INBOX.${nuid}.*`],
    ['an inbox with an empty token', `_INBOX.${nuid}..1`],
    ['an overlong subject', `_INBOX.${'a'.repeat(300)}`],
  ]
  it.each(targets)('refuses %s, on every class, even with a valid key', (_, reply) => {
    for (const cls of ['inbox', 'pack'] as const) {
      expect(guard.refusal(reply, cls, gw.key), `${cls} ${reply}`).toBeDefined()
    }
  })

  it('counts refusals and follows the configured prefixes', () => {
    const g = new ReplyGuard({ inboxPrefix: 'my_inbox', subjectPrefix: 'tenant-a' })
    expect(g.allows(`my_inbox.${nuid}`)).toBe(true)
    expect(g.allows(`_INBOX.${nuid}`)).toBe(false)
    expect(g.allows(`tenant-a.gw.g.${gw.id}.1`, 'pack', gw.key)).toBe(true)
    expect(g.allows(`cohort.gw.g.${gw.id}.1`, 'pack', gw.key)).toBe(false)
    expect(g.refused).toBe(2)
  })

  it('makes distinct keys whose id is the first 22 base64url characters of their SHA-256', () => {
    const a = newReplyKey()
    const b = newReplyKey()
    expect(a.key).not.toBe(b.key)
    expect(a.key).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(a.id).toBe(createHash('sha256').update(a.key).digest('base64url').slice(0, 22))
    expect(replyKeyId(a.key)).toBe(a.id)
  })
})

describe("isAckOf: a job delivery is acked only on its consumer's ack subject", () => {
  it.each([
    ['$JS.ACK.COHORT_JOBS.jobs-m.1.5.5.1700000000000000000.0', true],
    ['$JS.ACK.hub.ACCHASH.COHORT_JOBS.jobs-m.1.5.5.1700000000000000000.0.rnd', true],
    ['$JS.ACK.COHORT_JOBS.jobs-other.1.5.5.1700000000000000000.0', false],
    ['$JS.ACK.OTHER_JOBS.jobs-m.1.5.5.1700000000000000000.0', false],
    ['$KV.cohort-models.planted', false],
    ['_INBOX.abc', false],
    [undefined, false],
  ])('%s: %s', (reply, ok) => {
    expect(isAckOf(reply, 'COHORT_JOBS', 'jobs-m')).toBe(ok)
  })
})

describe('ReplyGuard.onRefused', () => {
  it('reports each refusal with its subject and reason, and survives a throwing callback', () => {
    const seen: string[] = []
    const g = new ReplyGuard({ onRefused: (r) => seen.push(`${r.subject} ${r.reply} ${r.reason}`) })
    expect(g.allows('$KV.cohort-models.x', 'inbox', undefined, 'cohort.meta.m')).toBe(false)
    expect(g.allows('_INBOX.AbCdEfGhIjKlMnOpQrStUv', 'inbox', undefined, 'cohort.meta.m')).toBe(true)
    expect(seen).toEqual(["cohort.meta.m $KV.cohort-models.x reply subject is a system subject ($KV, $JS, $SYS, $SRV...), never an asker's inbox"])
    const throwing = new ReplyGuard({
      onRefused: () => {
        throw new Error('logger down')
      },
    })
    expect(throwing.allows('$JS.API.INFO')).toBe(false)
  })
})
