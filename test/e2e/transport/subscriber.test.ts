// The NATS transport's subscriber (libs/transport/src/nats/subscriber.ts) on a real nats-server:
// its three steps per message (reply guard, in-flight bound, delivery with the pull of large ones).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { headers } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { InflightBudget, ReplyGuard, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { BLOB_HEADER, formatBlobRef } from '../../../libs/transport/src/blob.ts'
import { LargeMessages } from '../../../libs/transport/src/nats/large.ts'
import { ReconnectGuard } from '../../../libs/transport/src/nats/reconnect-guard.ts'
import { createNatsRequester, type NatsRequester } from '../../../libs/transport/src/nats/requester.ts'
import { createNatsSubscriber } from '../../../libs/transport/src/nats/subscriber.ts'
import { failure } from './failure.ts'

const MAX_PAYLOAD = 64 * 1024
const enc = new TextEncoder()
const dec = new TextDecoder()
let nats: NatsServerHandle
let subNc: NatsConnection
let askNc: NatsConnection
let subLarge: LargeMessages
let askLarge: LargeMessages
let ask: NatsRequester
const budget = new InflightBudget({ maxRequests: 1, maxBytes: 256 * 1024 })
const subs: TransportSubscription[] = []

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: MAX_PAYLOAD })
  ;[subNc, askNc] = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })])
  subLarge = new LargeMessages(subNc, { maxMessageBytes: 1024 * 1024 })
  askLarge = new LargeMessages(askNc, { maxMessageBytes: 1024 * 1024 })
  ask = createNatsRequester(askNc, askLarge, new ReconnectGuard(askNc))
})
afterAll(async () => {
  for (const s of subs) s.unsubscribe()
  ifStarted(subLarge)?.close()
  ifStarted(askLarge)?.close()
  await Promise.all(allStarted(subNc, askNc).map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

/** A subscription of the subscriber under test and its messages as they come. */
async function subscribe(subject: string, bounded: boolean) {
  const s = createNatsSubscriber(subNc, { large: subLarge, replies: new ReplyGuard(), budget })(subject, { bounded })
  subs.push(s)
  await subNc.flush()
  const it = (s as AsyncIterable<TransportMessage>)[Symbol.asyncIterator]()
  return { s, next: async () => (await it.next()).value as TransportMessage }
}

describe('the NATS subscriber', () => {
  it('drops a message whose reply subject is not an inbox, unread; delivers the next one', async () => {
    const { next } = await subscribe('sb.guard', false)
    askNc.publish('sb.guard', enc.encode('planted'), { reply: '$KV.cohort-models.x' })
    const p = ask.request('sb.guard', enc.encode('mine'), { timeoutMs: 5000 })
    const m = await next()
    expect(dec.decode(m.data)).toBe('mine')
    m.respond(enc.encode('ok'))
    expect(dec.decode(await p)).toBe('ok')
  })

  it('a bounded subscription refuses past its request bound with OVERLOADED, and admits again once answered', async () => {
    const { next } = await subscribe('sb.bound', true)
    const first = ask.request('sb.bound', enc.encode('1'), { timeoutMs: 5000 })
    const held = await next()
    expect(budget.requests).toBe(1)
    const e = await failure(ask.request('sb.bound', enc.encode('2'), { timeoutMs: 5000 }))
    expect(e.code).toBe('OVERLOADED')
    held.respond(enc.encode('a'))
    held.respond(enc.encode('again')) // a second answer gives back nothing more
    expect(budget.requests).toBe(0)
    expect(dec.decode(await first)).toBe('a')
    const third = ask.request('sb.bound', enc.encode('3'), { timeoutMs: 5000 })
    const m = await next()
    expect(dec.decode(m.data)).toBe('3')
    m.respond(enc.encode('c'))
    expect(dec.decode(await third)).toBe('c')
  })

  it('a bounded subscription refuses a message larger than its byte bound with PAYLOAD_TOO_LARGE, unpulled', async () => {
    await subscribe('sb.bytes', true)
    const e = await failure(ask.request('sb.bytes', new Uint8Array(300 * 1024), { timeoutMs: 5000 }))
    expect(e.code).toBe('PAYLOAD_TOO_LARGE')
    expect(e.message).toContain('(inflight.maxBytes) of 262144 bytes')
    expect(budget.requests).toBe(0)
  })

  it('an unbounded subscription does not count against the bound', async () => {
    const { next } = await subscribe('sb.free', false)
    const a = ask.request('sb.free', enc.encode('a'), { timeoutMs: 5000 })
    const b = ask.request('sb.free', enc.encode('b'), { timeoutMs: 5000 })
    const [ma, mb] = [await next(), await next()]
    expect(budget.requests).toBe(0)
    ma.respond(ma.data)
    mb.respond(mb.data)
    expect([dec.decode(await a), dec.decode(await b)]).toEqual(['a', 'b'])
  })

  it('pulls a large message before delivering it whole', async () => {
    const { next } = await subscribe('sb.large', true)
    const big = new Uint8Array(200 * 1024).map((_, i) => i % 253)
    const p = ask.request('sb.large', big, { timeoutMs: 10_000 })
    const m = await next()
    expect(m.data).toEqual(big)
    expect(budget.bytes).toBe(big.byteLength)
    m.respond(enc.encode('got it'))
    expect(dec.decode(await p)).toBe('got it')
    expect(budget.bytes).toBe(0)
  })

  it('a large message whose pull is refused is answered with the transfer error and gives its room back', async () => {
    await subscribe('sb.badref', true)
    const h = headers()
    // A chunk subject outside the blob prefix: nothing is requested from it (no confused deputy).
    h.set(BLOB_HEADER, formatBlobRef({ subject: '$JS.API.STREAM.DELETE.X', size: 100 * 1024, chunkSize: 60 * 1024, ttlMs: 1000 }))
    const reply = await askNc.request('sb.badref', new Uint8Array(0), { timeout: 5000, headers: h })
    const err = await failure(askLarge.body(reply))
    expect(err.code).toBe('BAD_REQUEST')
    expect(budget.requests).toBe(0)
    expect(budget.bytes).toBe(0)
  })

  it('unsubscribe ends the iteration', async () => {
    const { s } = await subscribe('sb.end', false)
    const done = (async () => {
      const got: TransportMessage[] = []
      for await (const m of s as AsyncIterable<TransportMessage>) got.push(m)
      return 'ended'
    })()
    s.unsubscribe()
    expect(await done).toBe('ended')
  })
})
