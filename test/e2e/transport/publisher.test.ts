// The NATS transport's publish (libs/transport/src/nats/publisher.ts) on a real nats-server with a
// small max_payload: reply subject and reply key, large publications as references.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { REPLY_KEY_HEADER } from '@cohort/transport'
import { LargeMessages } from '../../../libs/transport/src/nats/large.ts'
import { createNatsPublisher } from '../../../libs/transport/src/nats/publisher.ts'

const MAX_PAYLOAD = 64 * 1024
let nats: NatsServerHandle
let pubNc: NatsConnection
let subNc: NatsConnection
let large: LargeMessages
let reader: LargeMessages

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: MAX_PAYLOAD })
  ;[pubNc, subNc] = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })])
  large = new LargeMessages(pubNc, { maxMessageBytes: 1024 * 1024 })
  reader = new LargeMessages(subNc, { maxMessageBytes: 1024 * 1024 })
})
afterAll(async () => {
  ifStarted(large)?.close()
  ifStarted(reader)?.close()
  await Promise.all(allStarted(pubNc, subNc).map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

/** The next message on `subject` (subscribed before `send` runs). */
async function receive(subject: string, send: () => void): Promise<Msg> {
  const got = new Promise<Msg>((resolve) => {
    subNc.subscribe(subject, { max: 1, callback: (_e, m) => resolve(m) })
  })
  await subNc.flush()
  send()
  return got
}

describe('the NATS publisher', () => {
  const publish = () => createNatsPublisher(pubNc, large)

  it('publishes the data as is, with no headers and no reply unless asked', async () => {
    const m = await receive('pb.plain', () => publish()('pb.plain', new TextEncoder().encode('x')))
    expect(new TextDecoder().decode(m.data)).toBe('x')
    expect(m.headers).toBeUndefined()
    expect(m.reply).toBeFalsy()
  })

  it('carries the reply subject and the reply key header', async () => {
    const m = await receive('pb.keyed', () => publish()('pb.keyed', new Uint8Array([1]), { reply: '_INBOX.abc', replyKey: 'k1' }))
    expect(m.reply).toBe('_INBOX.abc')
    expect(m.headers?.get(REPLY_KEY_HEADER)).toBe('k1')
  })

  it('a publication past max_payload travels as a reference (with its reply key) that a reader pulls whole', async () => {
    const big = new Uint8Array(2 * MAX_PAYLOAD).map((_, i) => i % 199)
    const m = await receive('pb.large', () => publish()('pb.large', big, { replyKey: 'k2' }))
    expect(m.data.byteLength).toBe(0)
    expect(m.headers?.get(REPLY_KEY_HEADER)).toBe('k2')
    expect(reader.isRef(m)).toBe(true)
    expect(await reader.body(m, 10_000)).toEqual(big)
  })
})
