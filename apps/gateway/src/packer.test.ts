// The Packer's deadlines on one timer per packer (deadlines.ts): each request expires on its own
// deadline, in any order they were sent, and settled requests leave no timer behind. Fake timers
// and a recording transport (the packs' wire behaviour over real NATS is test/e2e/packs.test.ts).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { encodeNotice, subjects, type CohortError, type InferReply } from '@cohort/protocol'
import { AsyncQueue, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import { Deadlines, type Deadlined } from '@cohort/batching'
import { WorkerLiveness } from './liveness.ts'
import { Packer } from './packer.ts'

/** Subscriptions by exact subject or `prefix.>`, publications recorded. */
function recordingTransport() {
  const subs: { subject: string; q: AsyncQueue<TransportMessage> }[] = []
  const published: { subject: string; reply: string | undefined }[] = []
  const t = {
    maxMessageBytes: 1 << 20,
    subscribe(subject: string): TransportSubscription {
      const q = new AsyncQueue<TransportMessage>()
      subs.push({ subject, q })
      return Object.assign(q, {
        unsubscribe: () => q.end(true),
        drain: () => {
          q.end()
          return Promise.resolve()
        },
      })
    },
    publish(subject: string, _data: Uint8Array, o?: { reply?: string }) {
      published.push({ subject, reply: o?.reply })
    },
  } as unknown as Transport
  const deliver = (subject: string, data: Uint8Array) => {
    for (const s of subs) {
      if (s.subject === subject || (s.subject.endsWith('.>') && subject.startsWith(s.subject.slice(0, -1)))) {
        s.q.push({ subject, data } as TransportMessage)
      }
    }
  }
  return { t, published, deliver }
}

const settled = <T>(p: Promise<T>) =>
  p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  )

describe('Packer deadlines', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'Date', 'performance'] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('times out many requests with different deadlines each on its own deadline, on one timer', async () => {
    const { t } = recordingTransport()
    const s = subjects()
    const lv = new WorkerLiveness(t, s, 'gw1')
    const pk = new Packer(t, s, lv)
    const base = vi.getTimerCount()
    // Deadlines out of order: 50 requests, 10 ms to 500 ms, shuffled.
    const timeouts = Array.from({ length: 50 }, (_, i) => 10 * (((i * 37) % 50) + 1))
    const expiredAt = new Map<string, number>()
    const t0 = Date.now()
    const all = timeouts.map((ms, i) => {
      const id = `r${i}`
      expect(pk.accepts(id, new Uint8Array(8))).toBe(true)
      return settled(
        pk.send('m', id, new Uint8Array(8), ms, undefined).catch((e: unknown) => {
          expiredAt.set(id, Date.now() - t0)
          throw e
        }),
      )
    })
    // One timer for all 50 deadlines (plus the end-of-turn flush).
    expect(vi.getTimerCount() - base).toBeLessThanOrEqual(2)
    await vi.advanceTimersByTimeAsync(600)
    const results = await Promise.all(all)
    for (const [i, r] of results.entries()) {
      expect(r.ok).toBe(false)
      expect((r as { e: CohortError }).e.code).toBe('DEADLINE_EXCEEDED')
      // Never before its deadline, and on the tick of it (fake time is exact).
      expect(expiredAt.get(`r${i}`)).toBe(timeouts[i])
    }
    expect(pk.inFlight).toBe(0)
    expect(vi.getTimerCount()).toBe(base)
  })

  it('settled requests leave no timer behind, and the rest still expire on time', async () => {
    const { t, published, deliver } = recordingTransport()
    const s = subjects()
    const lv = new WorkerLiveness(t, s, 'gw2')
    const pk = new Packer(t, s, lv)
    const base = vi.getTimerCount()
    const ids = ['a', 'b', 'c', 'd']
    const ctl = new AbortController()
    const ps = ids.map((id, i) => {
      pk.accepts(id, new Uint8Array(8))
      return settled(pk.send('m', id, new Uint8Array(8), 100 * (i + 1), id === 'c' ? ctl.signal : undefined))
    })
    await vi.advanceTimersByTimeAsync(0) // the end-of-turn flush publishes one pack
    expect(published).toHaveLength(1)
    const reply = (id: string): InferReply => ({ v: 1, id, worker: 'w1' })
    // 'a' (the earliest deadline, the armed one) and 'd' are answered, 'c' cancelled; 'b' expires.
    deliver(published[0]!.reply!, encodeNotice({ v: 2, t: 'replies', replies: [reply('a'), reply('d')] }))
    ctl.abort()
    await vi.advanceTimersByTimeAsync(0)
    expect(pk.inFlight).toBe(1)
    expect(vi.getTimerCount() - base).toBe(1)
    await vi.advanceTimersByTimeAsync(199)
    expect(pk.inFlight).toBe(1) // 'b' not expired before 200 ms
    await vi.advanceTimersByTimeAsync(1)
    const [a, b, c, d] = await Promise.all(ps)
    expect(a).toMatchObject({ ok: true, v: { id: 'a' } })
    expect(d).toMatchObject({ ok: true, v: { id: 'd' } })
    expect((b as { e: CohortError }).e.code).toBe('DEADLINE_EXCEEDED')
    expect((c as { e: CohortError }).e.code).toBe('CANCELLED')
    expect(pk.inFlight).toBe(0)
    expect(vi.getTimerCount()).toBe(base)
  })

  it('answered requests leave the one timer idle; the next request reuses it, and it ends when it wakes with nothing due', async () => {
    const { t, published, deliver } = recordingTransport()
    const s = subjects()
    const pk = new Packer(t, s, new WorkerLiveness(t, s, 'gw3'))
    const base = vi.getTimerCount()
    const ps = Array.from({ length: 20 }, (_, i) => {
      pk.accepts(`x${i}`, new Uint8Array(8))
      return pk.send('m', `x${i}`, new Uint8Array(8), 30_000 + i, undefined)
    })
    await vi.advanceTimersByTimeAsync(0)
    expect(published).toHaveLength(2) // 16 per pack by default
    deliver(published[0]!.reply!, encodeNotice({ v: 2, t: 'replies', replies: Array.from({ length: 16 }, (_, i) => ({ v: 1, id: `x${i}`, worker: 'w' })) }))
    deliver(published[1]!.reply!, encodeNotice({ v: 2, t: 'replies', replies: Array.from({ length: 4 }, (_, i) => ({ v: 1, id: `x${16 + i}`, worker: 'w' })) }))
    await Promise.all(ps)
    expect(vi.getTimerCount()).toBe(base + 1) // idle (unref'd)
    // One at a time, later deadlines each: no new timer per request.
    for (let k = 0; k < 3; k++) {
      pk.accepts(`y${k}`, new Uint8Array(8))
      const p = pk.send('m', `y${k}`, new Uint8Array(8), 30_000, undefined)
      await vi.advanceTimersByTimeAsync(1)
      expect(vi.getTimerCount()).toBe(base + 1)
      deliver(published.at(-1)!.reply!, encodeNotice({ v: 2, t: 'replies', replies: [{ v: 1, id: `y${k}`, worker: 'w' }] }))
      await p
    }
    await vi.advanceTimersByTimeAsync(30_000)
    expect(vi.getTimerCount()).toBe(base)
  })
})

describe('Deadlines', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('expires items in deadline order with random adds and removes, never early, on one timer', () => {
    const fired: { id: number; at: number }[] = []
    const d = new Deadlines<Deadlined & { id: number }>((it) => fired.push({ id: it.id, at: performance.now() }))
    const t0 = performance.now()
    let seed = 1
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
    const items = Array.from({ length: 300 }, (_, id) => ({ id, deadline: t0 + 1 + Math.floor(rnd() * 1000), heapIndex: -1 }))
    for (const it of items) {
      d.add(it)
    }
    expect(vi.getTimerCount()).toBe(1)
    const removed = new Set<number>()
    for (const it of items.filter((_, i) => i % 3 === 0)) {
      d.remove(it)
      removed.add(it.id)
    }
    d.remove(items[0]!) // twice: no-op
    vi.advanceTimersByTime(1001)
    const want = items.filter((it) => !removed.has(it.id)).sort((a, b) => a.deadline - b.deadline || 0)
    expect(fired.map((f) => f.id).sort((a, b) => a - b)).toEqual(want.map((w) => w.id).sort((a, b) => a - b))
    for (const f of fired) {
      expect(f.at - t0).toBe(items[f.id]!.deadline - t0)
    }
    expect(fired.map((f) => items[f.id]!.deadline)).toEqual(want.map((w) => w.deadline))
    expect(d.size).toBe(0)
    expect(d.armed).toBe(false)
    expect(vi.getTimerCount()).toBe(0)
    d.close()
    d.close()
  })

  it('re-arms for an item earlier than the armed deadline, and close() forgets everything', () => {
    const fired: number[] = []
    const d = new Deadlines<Deadlined & { id: number }>((it) => fired.push(it.id))
    const t0 = performance.now()
    d.add({ id: 1, deadline: t0 + 500, heapIndex: -1 })
    d.add({ id: 2, deadline: t0 + 50, heapIndex: -1 })
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(50)
    expect(fired).toEqual([2])
    d.close()
    vi.advanceTimersByTime(1000)
    expect(fired).toEqual([2])
    expect(vi.getTimerCount()).toBe(0)
  })
})

describe('Deadlines on real timers', () => {
  it("the idle timer left when the last item goes keeps no process alive (unref'd), and is ref'd again while an item waits on it", () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    const before = timers()
    const d = new Deadlines<Deadlined>(() => undefined)
    const a = { deadline: performance.now() + 60_000, heapIndex: -1 }
    d.add(a)
    expect(timers()).toBe(before + 1)
    d.remove(a)
    expect(d.armed).toBe(true) // kept for the next item...
    expect(timers()).toBe(before) // ...but not holding the event loop
    d.add({ deadline: performance.now() + 60_001, heapIndex: -1 })
    expect(timers()).toBe(before + 1)
    d.close()
    expect(timers()).toBe(before)
  })
})
