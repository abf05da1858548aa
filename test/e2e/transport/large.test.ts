// The NATS transport's large messages (libs/transport/src/nats/large.ts) on a real nats-server
// with a small max_payload: offer and pull, replies forgotten once read, refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { type CohortError } from '@cohort/protocol'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { BLOB_HEADER, formatBlobRef } from '../../../libs/transport/src/blob.ts'
import { LargeMessages } from '../../../libs/transport/src/nats/large.ts'
import { failure } from './failure.ts'

const MAX_PAYLOAD = 64 * 1024
let nats: NatsServerHandle
let a: NatsConnection
let b: NatsConnection
let spy: NatsConnection
let sender: LargeMessages
let reader: LargeMessages
const seen: string[] = []
const big = new Uint8Array(3 * MAX_PAYLOAD + 17).map((_, i) => (i * 7) % 256)

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: MAX_PAYLOAD })
  const url = { servers: nats.url }
  ;[a, b, spy] = await Promise.all([connect(url), connect(url), connect(url)])
  spy.subscribe('>', { callback: (_e, m) => void seen.push(m.subject) })
  await spy.flush()
  sender = new LargeMessages(a, { maxMessageBytes: 1024 * 1024, blobTtlMs: 10_000 })
  reader = new LargeMessages(b, { maxMessageBytes: 1024 * 1024 })
})
afterAll(async () => {
  ifStarted(sender)?.close()
  ifStarted(reader)?.close()
  await Promise.all(allStarted(a, b, spy).map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

/** The small message that stands for a blob, as a receiver gets it. */
const refMsg = (h: Msg['headers']): Msg => ({ data: new Uint8Array(0), headers: h }) as unknown as Msg

describe('large messages over NATS', () => {
  it('is large only past max_payload (less headroom), and only when the bound is above it', () => {
    expect(sender.serverMax).toBe(MAX_PAYLOAD)
    expect(sender.isLarge(new Uint8Array(1000))).toBe(false)
    expect(sender.isLarge(new Uint8Array(MAX_PAYLOAD))).toBe(true)
    expect(new LargeMessages(a, { maxMessageBytes: MAX_PAYLOAD }).isLarge(new Uint8Array(MAX_PAYLOAD))).toBe(false)
  })

  it('an offered blob is pulled whole in chunks by another connection, and its declared size is read', async () => {
    const { headers, id } = sender.offer(big)
    const m = refMsg(headers)
    expect(reader.isRef(m)).toBe(true)
    expect(reader.sizeOf(m)).toBe(big.byteLength)
    expect(await reader.body(m, 10_000)).toEqual(big)
    // Requests and publications are kept until forgotten (their request settled), not at DONE.
    expect(sender.held).toBe(1)
    sender.forget(id)
    expect(sender.held).toBe(0)
  })

  it('a reply offered once is forgotten as soon as its reader has every chunk', async () => {
    const { headers } = sender.offer(big, 10_000, true)
    expect(sender.held).toBe(1)
    expect(await reader.body(refMsg(headers), 10_000)).toEqual(big)
    await a.flush()
    await b.flush()
    await a.flush()
    expect(sender.held).toBe(0)
  })

  it('a forgotten blob is BLOB_UNAVAILABLE for its reader', async () => {
    const { headers, id } = sender.offer(big)
    sender.forget(id)
    expect((await failure(reader.body(refMsg(headers), 10_000))).code).toBe('BLOB_UNAVAILABLE')
  })

  it('a reference naming a subject outside the blob prefix is BAD_REQUEST, and nothing is requested from it', async () => {
    const h = (await import('@nats-io/nats-core')).headers()
    h.set(BLOB_HEADER, formatBlobRef({ subject: '$KV.cohort-models.x', size: 100_000, chunkSize: 60_000, ttlMs: 1000 }))
    const e = await failure(reader.body(refMsg(h), 5000))
    expect(e.code).toBe('BAD_REQUEST')
    await spy.flush()
    expect(seen.filter((s) => s.startsWith('$KV'))).toEqual([])
  })

  it('once closed it offers nothing more (SHUTTING_DOWN); close is idempotent', () => {
    const l = new LargeMessages(a, { maxMessageBytes: 1024 * 1024 })
    l.close()
    l.close()
    const e = (() => {
      try {
        l.offer(big)
      } catch (x) {
        return x
      }
      return undefined
    })()
    expect((e as CohortError).code).toBe('SHUTTING_DOWN')
  })
})
