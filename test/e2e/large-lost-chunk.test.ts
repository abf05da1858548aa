// Issue 25, finding 8: one lost chunk answer must not fail a transfer. Two NATS transports on a
// real nats-server with a 64 KiB max_payload; the sender's connection drops the answer to one chunk
// request (the chunk was served, its answer never arrives: what a lost reply looks like). The
// receiver asks for that chunk again and gets the exact bytes; the sender keeps a reply's blob
// until the receiver says it has every chunk, then forgets it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { connect } from '@nats-io/transport-node'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { startNatsServer, type NatsServerHandle, ifStarted } from '@cohort/test-support'

let nats: NatsServerHandle
const conns: NatsConnection[] = []
const dec = new TextDecoder()

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false, maxPayload: 65_536 })
})
afterAll(async () => {
  await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  await ifStarted(nats)?.stop()
})

function bytes(n: number): Uint8Array {
  const b = new Uint8Array(n)
  for (let i = 0; i < n; i++) b[i] = (i * 2654435761) >>> 24
  return b
}

/** What the sender's chunk responder saw: chunk requests and `done` notices, by blob subject. */
interface Seen {
  asked: Map<string, number>
  done: string[]
}

/**
 * `nc`, except that on chunk subjects (`cohort.blob.*`) the first answer to a request for chunk
 * `lost` is dropped after the chunk was served (it never reaches the receiver).
 */
function lossy(nc: NatsConnection, lost: number, seen: Seen): NatsConnection {
  let dropped = false
  return new Proxy(nc, {
    get(target, p) {
      if (p === 'subscribe') {
        return (subject: string, opts?: object) => {
          const sub = target.subscribe(subject, opts)
          if (!subject.startsWith('cohort.blob.')) return sub
          return {
            unsubscribe: () => sub.unsubscribe(),
            async *[Symbol.asyncIterator]() {
              for await (const m of sub) {
                const body = dec.decode(m.data)
                if (body === 'done') {
                  seen.done.push(m.subject)
                  yield m
                  continue
                }
                const key = `${m.subject} ${body}`
                seen.asked.set(key, (seen.asked.get(key) ?? 0) + 1)
                if (body === String(lost) && !dropped) {
                  dropped = true
                  yield Object.create(m, { respond: { value: () => true } }) as Msg
                  continue
                }
                yield m
              }
            },
          }
        }
      }
      const v = Reflect.get(target, p) as unknown
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}

async function pair(lossySide: 'worker' | 'gateway', seen: Seen): Promise<{ worker: Transport; gateway: Transport; raw: NatsConnection; workerNc: NatsConnection }> {
  const a = await connect({ servers: nats.url })
  const b = await connect({ servers: nats.url })
  const raw = await connect({ servers: nats.url })
  conns.push(a, b, raw)
  const worker = createNatsTransport(lossySide === 'worker' ? lossy(a, 1, seen) : a)
  const gateway = createNatsTransport(lossySide === 'gateway' ? lossy(b, 1, seen) : b)
  return { worker, gateway, raw, workerNc: a }
}

describe('a chunk transfer survives a lost chunk answer (issue 25, finding 8)', () => {
  it('a large reply: the receiver asks for the lost chunk again, gets the exact bytes, then the sender forgets the blob', async () => {
    const seen: Seen = { asked: new Map(), done: [] }
    const { worker, gateway, raw, workerNc } = await pair('worker', seen)
    const reply = bytes(300_000) // 5 chunks of 61,440 bytes
    const sub = worker.subscribe('svc.big-reply')
    void (async () => {
      for await (const m of sub) m.respond(reply)
    })()
    await workerNc.flush() // the subscription is at the server before the request (else: no responders)
    const got = await gateway.request('svc.big-reply', new Uint8Array([1]), { timeoutMs: 20_000 })
    expect(Buffer.from(got).equals(Buffer.from(reply)), 'the exact bytes').toBe(true)
    const retried = [...seen.asked].filter(([k, n]) => k.endsWith(' 1') && n === 2)
    expect(retried, `chunk requests: ${JSON.stringify([...seen.asked])}`).toHaveLength(1)
    // Every chunk was served before the retry came: the blob was still there for it. Once the
    // receiver is done, the sender no longer holds it.
    const blob = retried[0]![0].split(' ')[0]!
    for (let i = 0; i < 100 && !seen.done.includes(blob); i++) await new Promise((r) => setTimeout(r, 20))
    expect(seen.done).toContain(blob)
    const after = await raw.request(blob, new TextEncoder().encode('0'), { timeout: 5_000 })
    expect(after.headers?.get('Cohort-Blob-Error')).toMatch(/^BLOB_UNAVAILABLE /)
    sub.unsubscribe()
    await Promise.all([worker.close(), gateway.close()])
  })

  it('a large request: the worker asks the gateway again for the lost chunk and runs on the exact bytes', async () => {
    const seen: Seen = { asked: new Map(), done: [] }
    const { worker, gateway } = await pair('gateway', seen)
    const body = bytes(200_000)
    const sub = worker.subscribe('svc.big-request')
    void (async () => {
      for await (const m of sub) m.respond(new TextEncoder().encode(String(m.data.reduce((s, x) => (s + x) % 1_000_003, 0))))
    })()
    const sum = body.reduce((s, x) => (s + x) % 1_000_003, 0)
    // The subscription reaches the server asynchronously: a small request answered means it is there.
    for (let i = 0; i < 50; i++) {
      const ok = await gateway.request('svc.big-request', new Uint8Array([0]), { timeoutMs: 2_000 }).then(
        () => true,
        () => false,
      )
      if (ok) break
      await new Promise((r) => setTimeout(r, 50))
    }
    const got = await gateway.request('svc.big-request', body, { timeoutMs: 20_000 })
    expect(dec.decode(got)).toBe(String(sum))
    expect([...seen.asked].filter(([k, n]) => k.endsWith(' 1') && n === 2)).toHaveLength(1)
    sub.unsubscribe()
    await Promise.all([worker.close(), gateway.close()])
  })
})
