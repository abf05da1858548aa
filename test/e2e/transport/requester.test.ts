// The NATS transport's requester (libs/transport/src/nats/requester.ts) on a real nats-server with
// a small max_payload: replies, each failure's error code, abort, large requests and replies both
// ways, requestAll.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { LargeMessages } from '../../../libs/transport/src/nats/large.ts'
import { ReconnectGuard } from '../../../libs/transport/src/nats/reconnect-guard.ts'
import { createNatsRequester, type NatsRequester } from '../../../libs/transport/src/nats/requester.ts'
import { failure } from './failure.ts'

const MAX_PAYLOAD = 64 * 1024
const enc = new TextEncoder()
let nats: NatsServerHandle
let askerNc: NatsConnection
let serverNc: NatsConnection
let spy: NatsConnection
let askerLarge: LargeMessages
let serverLarge: LargeMessages
let req: NatsRequester
const seen: string[] = []

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: MAX_PAYLOAD })
  const url = { servers: nats.url }
  ;[askerNc, serverNc, spy] = await Promise.all([connect(url), connect(url), connect(url)])
  spy.subscribe('rq.>', { callback: (_e, m) => void seen.push(m.subject) })
  await spy.flush()
  askerLarge = new LargeMessages(askerNc, { maxMessageBytes: 1024 * 1024 })
  serverLarge = new LargeMessages(serverNc, { maxMessageBytes: 1024 * 1024 })
  req = createNatsRequester(askerNc, askerLarge, new ReconnectGuard(askerNc))
  // rq.echo: the body back (pulled and answered as blobs when large); rq.silent: never answers.
  serverNc.subscribe('rq.echo', {
    callback: (_e, m) => void serverLarge.body(m).then((d) => serverLarge.respond(m, d)),
  })
  serverNc.subscribe('rq.silent', { callback: () => undefined })
  for (const body of ['a', '', 'b']) {
    serverNc.subscribe('rq.all', { callback: (_e, m) => void m.respond(enc.encode(body)) })
  }
  await serverNc.flush()
})
afterAll(async () => {
  ifStarted(askerLarge)?.close()
  ifStarted(serverLarge)?.close()
  await Promise.all(allStarted(askerNc, serverNc, spy).map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

describe('the NATS requester', () => {
  it('sends a request and returns its reply', async () => {
    expect(new TextDecoder().decode(await req.request('rq.echo', enc.encode('hi'), { timeoutMs: 5000 }))).toBe('hi')
  })

  it('a request and a reply past max_payload travel as chunks, whole, and nothing is kept after', async () => {
    const big = new Uint8Array(5 * MAX_PAYLOAD).map((_, i) => i % 251)
    const back = await req.request('rq.echo', big, { timeoutMs: 10_000 })
    expect(back).toEqual(big)
    expect(askerLarge.held).toBe(0)
  })

  it('no responders is NO_WORKER, at once', async () => {
    const e = await failure(req.request('nobody.here', enc.encode('x'), { timeoutMs: 30_000 }))
    expect(e.code).toBe('NO_WORKER')
  })

  it('no reply within the timeout is DEADLINE_EXCEEDED naming the wait', async () => {
    const e = await failure(req.request('rq.silent', enc.encode('x'), { timeoutMs: 200 }))
    expect(e.code).toBe('DEADLINE_EXCEEDED')
    expect(e.message).toContain('within 200 ms')
  })

  it('an abort while waiting is CANCELLED; an aborted signal sends nothing', async () => {
    const ac = new AbortController()
    const p = req.request('rq.silent', enc.encode('x'), { timeoutMs: 30_000, signal: ac.signal })
    ac.abort()
    expect((await failure(p)).code).toBe('CANCELLED')
    const before = seen.filter((s) => s === 'rq.echo').length
    expect((await failure(req.request('rq.echo', enc.encode('x'), { timeoutMs: 5000, signal: ac.signal }))).code).toBe('CANCELLED')
    await spy.flush()
    await req.request('rq.echo', enc.encode('barrier'), { timeoutMs: 5000 })
    await spy.flush()
    expect(seen.filter((s) => s === 'rq.echo').length).toBe(before + 1) // the barrier only
  })

  it('a request over maxMessageBytes is PAYLOAD_TOO_LARGE naming the bound, and is not sent', async () => {
    const before = seen.length
    const e = await failure(req.request('rq.echo', new Uint8Array(1024 * 1024 + 1), { timeoutMs: 5000 }))
    expect(e.code).toBe('PAYLOAD_TOO_LARGE')
    expect(e.message).toContain('(maxMessageBytes) of 1048576 bytes')
    await spy.flush()
    expect(seen.length).toBe(before)
  })

  it('requestAll gathers every non-empty reply within the wait; with no responders, none', async () => {
    const all = await req.requestAll('rq.all', new Uint8Array(0), { timeoutMs: 500 })
    expect(all.map((d) => new TextDecoder().decode(d)).sort()).toEqual(['a', 'b'])
    expect(await req.requestAll('nobody.here', new Uint8Array(0), { timeoutMs: 200 })).toEqual([])
  })
})
