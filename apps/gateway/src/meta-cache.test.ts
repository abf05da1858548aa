import { describe, expect, it } from 'vitest'
import { ServeWhileRefresh } from './meta-cache.ts'

/** A fetch that answers when told, counting its calls. */
function gatedFetch() {
  const calls: { key: string; answer: (v: string) => void; fail: (e: Error) => void }[] = []
  const fetch = (key: string) =>
    new Promise<string>((answer, fail) => {
      calls.push({ key, answer, fail })
    })
  return { calls, fetch }
}

const settled = async <T>(p: Promise<T>): Promise<T | 'pending'> => {
  let out: T | 'pending' = 'pending'
  void p.then((v) => (out = v))
  for (let i = 0; i < 5; i++) {
    await Promise.resolve()
  }
  return out
}

describe('ServeWhileRefresh', () => {
  it('fetches a key once for concurrent callers, then answers from its copy without fetching', async () => {
    const f = gatedFetch()
    let now = 0
    const c = new ServeWhileRefresh(f.fetch, 1000, () => now)
    const a = c.get('m')
    const b = c.get('m')
    expect(f.calls).toHaveLength(1)
    f.calls[0]!.answer('v1')
    expect([await a, await b]).toEqual(['v1', 'v1'])
    now = 999
    expect(await settled(c.get('m'))).toBe('v1')
    expect(f.calls).toHaveLength(1)
  })

  it('answers a stale copy at once and refreshes it once in the background', async () => {
    const f = gatedFetch()
    let now = 0
    const c = new ServeWhileRefresh(f.fetch, 1000, () => now)
    const first = c.get('m')
    f.calls[0]!.answer('v1')
    await first
    now = 1000
    expect(await settled(c.get('m'))).toBe('v1') // not waiting for the refresh
    expect(await settled(c.get('m'))).toBe('v1')
    expect(f.calls).toHaveLength(2) // one refresh for both
    f.calls[1]!.answer('v2')
    await Promise.resolve()
    await Promise.resolve()
    expect(await settled(c.get('m'))).toBe('v2')
    expect(f.calls).toHaveLength(2)
  })

  it('throws a failed first fetch to its callers and forgets a copy whose refresh failed', async () => {
    const f = gatedFetch()
    let now = 0
    const c = new ServeWhileRefresh(f.fetch, 1000, () => now)
    const a = c.get('m')
    f.calls[0]!.fail(new Error('no worker'))
    await expect(a).rejects.toThrow('no worker')
    const b = c.get('m') // asks again
    expect(f.calls).toHaveLength(2)
    f.calls[1]!.answer('v1')
    await b
    now = 2000
    expect(await settled(c.get('m'))).toBe('v1')
    f.calls[2]!.fail(new Error('gone'))
    await Promise.resolve()
    await Promise.resolve()
    expect(await settled(c.get('m'))).toBe('pending') // waits for a fresh answer now
    expect(f.calls).toHaveLength(4)
  })

  it('does not keep answers `keep` refuses (an empty discovery)', async () => {
    const f = gatedFetch()
    const c = new ServeWhileRefresh(
      f.fetch,
      1000,
      () => 0,
      (v) => v !== '',
    )
    const a = c.get('')
    f.calls[0]!.answer('')
    expect(await a).toBe('')
    void c.get('')
    expect(f.calls).toHaveLength(2)
  })
})
