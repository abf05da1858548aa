// The reply guard of the NATS transport on a real nats-server, for the responders that
// nats-deputy.test.ts does not start as processes (model repository control, generation steps on a
// pack's reply subject) and for both subscription classes: a responder built on
// `Transport.subscribe` answers (or publishes on) only a reply subject the asker owns. A raw
// connection subscribed to `>` is the oracle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { headers } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { createHash, randomBytes } from 'node:crypto'
import { createNatsTransport, type Transport, type TransportMessage } from '@cohort/transport'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

/** A gateway reply key and its id, as a gateway makes them (docs/security.md#replies-bound-to-their-gateway). */
function newReplyKey(): { key: string; id: string } {
  const key = randomBytes(32).toString('base64url')
  return { key, id: createHash('sha256').update(key).digest('base64url').slice(0, 22) }
}

let nats: NatsServerHandle
let spy: NatsConnection
let raw: NatsConnection
let worker: Transport
const seen: string[] = []

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  spy = await connect({ servers: nats.url })
  spy.subscribe('>', { callback: (_e, m) => void seen.push(m.subject) })
  await spy.flush()
  raw = await connect({ servers: nats.url })
  worker = createNatsTransport(await connect({ servers: nats.url }), { ownsConnection: true })
})
afterAll(async () => {
  await ifStarted(worker)?.close()
  await Promise.all(allStarted(spy, raw).map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

/** Serve `subject` like the worker's responders do: answer, and for packs publish a step first. */
function serve(subject: string, replies: 'inbox' | 'pack', answered: string[]): void {
  const sub = worker.subscribe(subject, { replies })
  void (async () => {
    for await (const m of sub as AsyncIterable<TransportMessage>) {
      answered.push(m.reply ?? '')
      if (m.reply?.startsWith('cohort.gw.')) worker.publish(m.reply, new TextEncoder().encode('step')) // a generation step
      m.respond(new TextEncoder().encode('answer'))
    }
  })()
}

describe('the NATS transport answers only reply subjects its askers own', () => {
  const gw = newReplyKey()
  const mine = `cohort.gw.g-1.${gw.id}.0`
  const targets = [
    '$KV.cohort-models.planted',
    '$JS.ACK.COHORT_JOBS.jobs-m.1.1.1.1700000000000000000.0',
    '$JS.API.STREAM.PURGE.KV_cohort-config',
    '$SYS.REQ.SERVER.PING',
    `cohort.gw.victim.${newReplyKey().id}.0`,
    `other.gw.g-1.${gw.id}.0`,
    '_INBOX.x',
  ]

  it.each([
    ['model repository control (cohort.repo.load)', 'cohort.repo.load', 'inbox'],
    ['a model subject with packs and generation steps (cohort.infer.m)', 'cohort.infer.m', 'pack'],
  ] as const)('%s: no answer and no step on any target; its own inbox works', async (_, subject, cls) => {
    const answered: string[] = []
    serve(subject, cls, answered)
    await new Promise((r) => setTimeout(r, 50))
    const from = seen.length
    const h = headers()
    h.set('Cohort-Reply-Key', gw.key)
    for (const reply of targets) raw.publish(subject, new Uint8Array(1), { reply, headers: h })
    // Then what must work: a client's inbox, and (packs) the gateway inbox its key proves.
    const ok = await raw.request(subject, new Uint8Array(1), { timeout: 5_000 })
    expect(new TextDecoder().decode(ok.data)).toBe('answer')
    if (cls === 'pack') {
      raw.publish(subject, new Uint8Array(1), { reply: mine, headers: h })
      const noKey = `cohort.gw.g-1.${gw.id}.1`
      raw.publish(subject, new Uint8Array(1), { reply: noKey })
    }
    await raw.flush()
    await new Promise((r) => setTimeout(r, 300))
    await spy.flush()
    const got = seen.slice(from)
    expect(
      got.filter((s) => targets.includes(s)),
      'published on a target',
    ).toEqual([])
    expect(
      answered.filter((r) => targets.includes(r)),
      'handed to the responder',
    ).toEqual([])
    if (cls === 'pack') {
      expect(got.filter((s) => s === mine)).toHaveLength(2) // the step and the answer
      expect(got).not.toContain(`cohort.gw.g-1.${gw.id}.1`)
    }
  })
})
