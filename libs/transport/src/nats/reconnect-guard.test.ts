import { afterEach, describe, expect, it, vi } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'
import { AsyncQueue } from '../async-queue.ts'
import { ReconnectGuard } from './reconnect-guard.ts'

type Status = { type: string }

/** A connection whose status events the test emits. */
function fakeStatus() {
  const q = new AsyncQueue<Status>()
  const conn = { status: () => q } as unknown as Pick<NatsConnection, 'status'>
  return { conn, emit: (type: string) => q.push({ type }) }
}

afterEach(() => {
  vi.useRealTimers()
})

async function settle(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => 'resolved',
    (e: unknown) => e,
  )
}

describe('ReconnectGuard', () => {
  it('fails a request in flight across a reconnect once the grace passes without a reply', async () => {
    vi.useFakeTimers()
    const { conn, emit } = fakeStatus()
    const g = new ReconnectGuard(conn, 1000)
    const w = g.watch('cohort.infer.m')
    let outcome: unknown
    void settle(w.lost).then((o) => (outcome = o))
    emit('disconnect')
    emit('reconnect')
    await vi.advanceTimersByTimeAsync(999)
    expect(outcome).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    expect(outcome).toBeInstanceOf(CohortError)
    expect((outcome as CohortError).code).toBe('REPLY_LOST')
    expect((outcome as CohortError).status).toBe(503)
    expect((outcome as CohortError).retryAfterS).toBe(1)
    expect((outcome as CohortError).message).toMatch(/cohort\.infer\.m/)
  })

  it('leaves requests alone without a reconnect, after release, and when turned off', async () => {
    vi.useFakeTimers()
    const { conn, emit } = fakeStatus()
    const g = new ReconnectGuard(conn, 1000)
    const quiet = g.watch('a')
    const released = g.watch('b')
    const outcomes: Record<string, unknown> = {}
    void settle(quiet.lost).then((o) => (outcomes['a'] = o))
    void settle(released.lost).then((o) => (outcomes['b'] = o))
    emit('disconnect') // a disconnect alone: the reply may still come on the same server
    emit('ldm')
    await vi.advanceTimersByTimeAsync(5000)
    expect(outcomes).toEqual({})
    released.release()
    released.release()
    emit('reconnect')
    await vi.advanceTimersByTimeAsync(5000)
    expect(outcomes['b']).toBeUndefined()
    expect(outcomes['a']).toBeInstanceOf(CohortError)
    // A request that starts after the reconnect is not affected by it.
    const later = g.watch('c')
    void settle(later.lost).then((o) => (outcomes['c'] = o))
    await vi.advanceTimersByTimeAsync(5000)
    expect(outcomes['c']).toBeUndefined()

    const off = fakeStatus()
    const g0 = new ReconnectGuard(off.conn, 0)
    const w0 = g0.watch('d')
    void settle(w0.lost).then((o) => (outcomes['d'] = o))
    off.emit('reconnect')
    await vi.advanceTimersByTimeAsync(60_000)
    expect(outcomes['d']).toBeUndefined()
  })

  it('rejects a negative grace', () => {
    expect(() => new ReconnectGuard(fakeStatus().conn, -1)).toThrow(RangeError)
  })
})
