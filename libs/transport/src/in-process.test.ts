import { describe, expect, it } from 'vitest'
import { CohortError } from '@cohort/protocol'
import { InProcessTransport, consume } from './index.ts'

const enc = (s: string) => new TextEncoder().encode(s)
const dec = (b: Uint8Array) => new TextDecoder().decode(b)

describe('InProcessTransport', () => {
  it('answers NO_WORKER at once without subscribers', async () => {
    const t = new InProcessTransport()
    await expect(t.request('a', enc('x'), { timeoutMs: 1000 })).rejects.toMatchObject({ code: 'NO_WORKER' })
  })

  it('round-robins a queue group and replies', async () => {
    const t = new InProcessTransport()
    const seen: string[] = []
    for (const name of ['w1', 'w2']) {
      const sub = t.subscribe('s', { queue: 'q' })
      void (async () => {
        for await (const m of sub) {
          seen.push(name)
          m.respond(enc(`${name}:${dec(m.data)}`))
        }
      })()
    }
    const replies = await Promise.all([1, 2, 3, 4].map((i) => t.request('s', enc(String(i)), { timeoutMs: 1000 })))
    expect(replies.map(dec).sort()).toEqual(['w1:1', 'w1:3', 'w2:2', 'w2:4'])
    expect(seen.filter((s) => s === 'w1')).toHaveLength(2)
    await t.close()
  })

  it('times out with DEADLINE_EXCEEDED and aborts with CANCELLED', async () => {
    const t = new InProcessTransport()
    t.subscribe('s')
    await expect(t.request('s', enc('x'), { timeoutMs: 10 })).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' })
    // A budget computed from a deadline is fractional; the message says whole milliseconds.
    await expect(t.request('s', enc('x'), { timeoutMs: 12.3456 })).rejects.toMatchObject({ message: 'no reply on s within 12 ms' })
    const ac = new AbortController()
    const p = t.request('s', enc('x'), { timeoutMs: 1000, signal: ac.signal })
    ac.abort()
    await expect(p).rejects.toBeInstanceOf(CohortError)
    await expect(p).rejects.toMatchObject({ code: 'CANCELLED' })
  })

  it('requestAll answers once every receiver replied, not at its timeout; a silent one is waited for', async () => {
    const t = new InProcessTransport()
    for (const name of ['w1', 'w2']) {
      const sub = t.subscribe('d', { queue: 'q' })
      void (async () => {
        for await (const m of sub) {
          m.respond(enc(name))
        }
      })()
    }
    const pending = new Promise<'pending'>((r) => setTimeout(() => r('pending'), 2000).unref())
    const all = await Promise.race([t.requestAll('d', new Uint8Array(0), { timeoutMs: 60_000 }), pending])
    expect(all === 'pending' ? all : all.map(dec).sort()).toEqual(['w1', 'w2'])
    t.subscribe('d') // never replies: the call waits its timeout and answers what came
    expect((await t.requestAll('d', new Uint8Array(0), { timeoutMs: 20 })).map(dec).sort()).toEqual(['w1', 'w2'])
    expect(await t.requestAll('none', new Uint8Array(0), { timeoutMs: 60_000 })).toEqual([])
    await t.close()
  })

  it('delivers to a prefix.> subscription at any depth below the prefix (a pack reply <inbox>.<key id>.<seq>)', async () => {
    const t = new InProcessTransport()
    const sub = t.subscribe('cohort.gw.g1.>')
    t.publish('cohort.gw.g1.KEY.7', new Uint8Array([1]))
    t.publish('cohort.gw.g1.8', new Uint8Array([2]))
    t.publish('cohort.gw.g2.KEY.9', new Uint8Array([3]))
    const got: string[] = []
    for await (const m of sub) {
      got.push(m.subject)
      if (got.length === 2) break
    }
    expect(got).toEqual(['cohort.gw.g1.KEY.7', 'cohort.gw.g1.8'])
    await t.close()
  })

  it('refuses messages over maxMessageBytes', async () => {
    const t = new InProcessTransport({ maxMessageBytes: 4 })
    t.subscribe('s')
    await expect(t.request('s', enc('12345'), { timeoutMs: 100 })).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
  })

  it('drain ends the iterator after delivered messages', async () => {
    const t = new InProcessTransport()
    const sub = t.subscribe('s')
    t.publish('s', enc('a'))
    t.publish('s', enc('b'))
    await sub.drain()
    t.publish('s', enc('c'))
    const got: string[] = []
    for await (const m of sub) {
      got.push(dec(m.data))
    }
    expect(got).toEqual(['a', 'b'])
  })

  it('keeps a directory of announced models', async () => {
    const t = new InProcessTransport()
    expect(await t.directory.known('m')).toBe(false)
    await t.directory.announce('m', enc('{}'))
    expect(await t.directory.known('m')).toBe(true)
  })

  it('carries a value without encoding it; data is its encoding, made only when read; answers come back as values', async () => {
    const t = new InProcessTransport()
    const value = { n: 1, bytes: new Uint8Array([1, 2, 3]) }
    let encodes = 0
    const sub = t.subscribe('s')
    const inbox = t.subscribe('_INBOX.x.>')
    t.publishValue('s', { value, encode: () => (encodes++, enc('bytes')) }, { reply: '_INBOX.x.1' })
    const got = (await sub[Symbol.asyncIterator]().next()).value!
    expect(got.value).toBe(value) // the object itself: no copy
    expect(encodes).toBe(0)
    expect(dec(got.data)).toBe('bytes')
    expect(dec(got.data)).toBe('bytes')
    expect(encodes).toBe(1)
    const answer = { ok: true }
    expect(got.respondValue!({ value: answer, encode: () => enc('answer') })).toBe(true)
    const back = (await inbox[Symbol.asyncIterator]().next()).value!
    expect(back.value).toBe(answer)
    expect(back.subject).toBe('_INBOX.x.1')
    // Nobody on the subject: the no-responders notice on the reply subject, as for publish.
    t.publishValue('nobody', { value: 1, encode: () => enc('1') }, { reply: '_INBOX.x.2' })
    const none = (await inbox[Symbol.asyncIterator]().next()).value!
    expect(none).toMatchObject({ subject: '_INBOX.x.2', noResponders: true })
    await t.close()
  })

  it('consume() of an in-process subscription (listen, no for await): in order, a throwing handler reported, the rest dropped at unsubscribe, delivered ones consumed at drain', async () => {
    const t = new InProcessTransport()
    const sub = t.subscribe('s')
    t.publish('s', enc('before'))
    const seen: string[] = []
    let ended = false
    const loop = consume(
      sub,
      (m) => {
        seen.push(dec(m.data))
        if (dec(m.data) === 'boom') {
          throw new Error('handler threw')
        }
      },
      (e) => seen.push(`error: ${(e as Error).message}`),
    ).then(() => (ended = true))
    for (const x of ['a', 'boom', 'b']) {
      t.publish('s', enc(x))
    }
    await Promise.resolve()
    await new Promise((r) => setImmediate(r))
    expect(seen).toEqual(['before', 'a', 'boom', 'error: handler threw', 'b'])
    t.publish('s', enc('c'))
    sub.unsubscribe() // 'c' was handed to a microtask, not yet run: dropped
    await loop
    expect(ended).toBe(true)
    expect(seen.at(-1)).toBe('b')
    const sub2 = t.subscribe('s2')
    const got: string[] = []
    const loop2 = consume(sub2, (m) => got.push(dec(m.data)))
    t.publish('s2', enc('x'))
    await sub2.drain() // drain: what was delivered is still consumed
    await loop2
    expect(got).toEqual(['x'])
    await t.close()
  })
})
