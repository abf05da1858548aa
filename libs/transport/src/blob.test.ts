import { afterEach, describe, expect, it, vi } from 'vitest'
import { CohortError } from '@cohort/protocol'
import { BlobStore, chunkCount, fetchBlob, formatBlobError, formatBlobRef, parseBlobError, parseBlobRef, type BlobRef, type ChunkFetcher } from './blob.ts'

function bytes(n: number, seed = 7): Uint8Array {
  const b = new Uint8Array(n)
  let x = seed
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    b[i] = x >>> 24
  }
  return b
}

/** A sender: a store holding `data`, and a fetcher that reads from it like the NATS responder does. */
function sender(data: Uint8Array, chunkSize: number, once = false): { store: BlobStore; ref: BlobRef; fetch: ChunkFetcher } {
  const store = new BlobStore()
  const id = store.put(data, chunkSize, 5_000, once)
  const fetch: ChunkFetcher = (i) => {
    const c = store.chunk(id, i)
    return c ? Promise.resolve(c.slice()) : Promise.reject(new CohortError('BLOB_UNAVAILABLE', `${id} gone`))
  }
  return { store, ref: { subject: `_INBOX.x.${id}`, size: data.byteLength, chunkSize, ttlMs: 5_000 }, fetch }
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return 'resolved'
  } catch (e) {
    return e instanceof CohortError ? e.code : `not a CohortError: ${String(e)}`
  }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('blob references', () => {
  it('round-trips through the header format', () => {
    const r: BlobRef = { subject: '_INBOX.abc.b1', size: 5_000_000, chunkSize: 1_044_480, ttlMs: 30_000 }
    expect(parseBlobRef(formatBlobRef(r))).toEqual(r)
  })

  it.each(['', 'v2 s 1 1 1', 'v1 s -1 10 10', 'v1 s 10 0 10', 'v1 s 10 10 0', 'v1 s x 10 10', 'v1 s 1 1 1 extra'])('rejects the malformed header %j with BAD_REQUEST', (h) => {
    expect(() => parseBlobRef(h)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }))
  })

  it('carries a transfer error code and message', () => {
    const e = parseBlobError(formatBlobError(new CohortError('PAYLOAD_TOO_LARGE', 'too big\nreally')))
    expect(e.code).toBe('PAYLOAD_TOO_LARGE')
    expect(e.message).toBe('too big really')
    expect(parseBlobError('WHATEVER odd').code).toBe('BLOB_UNAVAILABLE')
  })
})

describe('chunking and reassembly', () => {
  it.each([
    [10_000, 1_000],
    [10_001, 1_000],
    [999, 1_000],
    [5 * 1024 * 1024, 1024 * 1024 - 4096],
  ])('reassembles %i bytes sent in chunks of %i exactly', async (size, chunkSize) => {
    const data = bytes(size)
    const { ref, fetch } = sender(data, chunkSize)
    const out = await fetchBlob(ref, fetch, { maxBytes: 64 * 1024 * 1024 })
    expect(out.byteLength).toBe(size)
    expect(Buffer.from(out).equals(Buffer.from(data))).toBe(true)
  })

  it('reassembles an empty blob', async () => {
    const { ref, fetch } = sender(new Uint8Array(0), 100)
    expect(chunkCount(0, 100)).toBe(1)
    expect((await fetchBlob(ref, fetch, { maxBytes: 10 })).byteLength).toBe(0)
  })

  it('pulls every chunk with at most `window` requests in flight', async () => {
    const data = bytes(20_000)
    const { ref, fetch } = sender(data, 1_000)
    let inFlight = 0
    let most = 0
    const seen: number[] = []
    const slow: ChunkFetcher = async (i, t) => {
      inFlight++
      most = Math.max(most, inFlight)
      seen.push(i)
      await new Promise((r) => setTimeout(r, 2))
      inFlight--
      return fetch(i, t)
    }
    await fetchBlob(ref, slow, { maxBytes: 1e9, window: 3 })
    expect(most).toBe(3)
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i))
  })

  it('fails with BLOB_UNAVAILABLE when a chunk is missing (the sender forgot the blob)', async () => {
    const { store, ref, fetch } = sender(bytes(10_000), 1_000)
    store.close()
    expect(await codeOf(fetchBlob(ref, fetch, { maxBytes: 1e9 }))).toBe('BLOB_UNAVAILABLE')
  })

  it('fails with BLOB_UNAVAILABLE when one chunk is truncated, and stops pulling', async () => {
    const { ref, fetch } = sender(bytes(10_000), 1_000)
    let calls = 0
    const truncating: ChunkFetcher = async (i, t) => {
      calls++
      const c = await fetch(i, t)
      return i === 2 ? c.subarray(0, 10) : c
    }
    const err = await fetchBlob(ref, truncating, { maxBytes: 1e9, window: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CohortError)
    expect((err as CohortError).code).toBe('BLOB_UNAVAILABLE')
    expect((err as CohortError).message).toMatch(/chunk 3\/10 .* has 10 bytes, expected 1000/)
    expect(calls).toBe(3)
  })

  it('fails with BLOB_UNAVAILABLE when a chunk is too long', async () => {
    const { ref, fetch } = sender(bytes(3_000), 1_000)
    const padded: ChunkFetcher = async (i, t) => new Uint8Array([...(await fetch(i, t)), 0])
    expect(await codeOf(fetchBlob(ref, padded, { maxBytes: 1e9 }))).toBe('BLOB_UNAVAILABLE')
  })

  it('wraps any fetch failure (no responders, timeout) as BLOB_UNAVAILABLE', async () => {
    const ref = { subject: 's', size: 10, chunkSize: 5, ttlMs: 1_000 }
    const failing: ChunkFetcher = () => Promise.reject(new Error('503 no responders'))
    const err = (await fetchBlob(ref, failing, { maxBytes: 100 }).catch((e: unknown) => e)) as CohortError
    expect(err.code).toBe('BLOB_UNAVAILABLE')
    expect(err.message).toContain('no responders')
  })

  it('never hangs: a fetcher that never answers fails once the time to live is over', async () => {
    const ref = { subject: 's', size: 10, chunkSize: 5, ttlMs: 60_000 }
    const never: ChunkFetcher = () => new Promise(() => undefined)
    const t0 = Date.now()
    const err = (await fetchBlob(ref, never, { maxBytes: 100, timeoutMs: 50 }).catch((e: unknown) => e)) as CohortError
    expect(err.code).toBe('BLOB_UNAVAILABLE')
    expect(err.message).toMatch(/not received within 50 ms/)
    expect(Date.now() - t0).toBeLessThan(5_000)
  })

  it('asks again for a chunk whose answer was lost, and reassembles the blob', async () => {
    const data = bytes(3_000)
    const { store, ref, fetch } = sender(data, 1_000, true)
    const asked: number[] = []
    let dropped = false
    // Chunk 1's first answer never comes (lost on the way): that try times out and is retried.
    const lossy: ChunkFetcher = (i, t) => {
      asked.push(i)
      if (i === 1 && !dropped) {
        dropped = true
        return new Promise((_, reject) => setTimeout(() => reject(new Error(`timeout after ${t} ms`)), t))
      }
      return fetch(i, t)
    }
    const out = await fetchBlob(ref, lossy, { maxBytes: 10_000, chunkTimeoutMs: 30 })
    expect(out).toEqual(data)
    expect(asked.filter((i) => i === 1)).toHaveLength(2)
    store.close()
  })

  it('gives up on a chunk after `attempts` tries, and never retries what the sender refused', async () => {
    const ref = { subject: 's', size: 10, chunkSize: 5, ttlMs: 60_000 }
    let tries = 0
    const lost: ChunkFetcher = () => {
      tries++
      return Promise.reject(new Error('timeout'))
    }
    const err = (await fetchBlob(ref, lost, { maxBytes: 100, window: 1, attempts: 3 }).catch((e: unknown) => e)) as CohortError
    expect(err.code).toBe('BLOB_UNAVAILABLE')
    expect(tries).toBe(3)
    let refusedTries = 0
    const refused: ChunkFetcher = () => {
      refusedTries++
      return Promise.reject(new CohortError('BLOB_UNAVAILABLE', 'expired'))
    }
    expect(await codeOf(fetchBlob(ref, refused, { maxBytes: 100, window: 1, attempts: 3 }))).toBe('BLOB_UNAVAILABLE')
    expect(refusedTries).toBe(1)
  })

  it('refuses a blob over maxBytes before pulling anything', async () => {
    let called = false
    const ref = { subject: 's', size: 1_000, chunkSize: 100, ttlMs: 1_000 }
    const code = await codeOf(
      fetchBlob(
        ref,
        () => {
          called = true
          return Promise.resolve(new Uint8Array(100))
        },
        { maxBytes: 999 },
      ),
    )
    expect(code).toBe('PAYLOAD_TOO_LARGE')
    expect(called).toBe(false)
  })
})

describe('BlobStore', () => {
  it('keeps a once-blob after every chunk was served, until its reader is done (a lost answer can be asked again)', () => {
    const s = new BlobStore()
    const id = s.put(bytes(2_500), 1_000, 60_000, true)
    for (const i of [0, 1, 2]) expect(s.chunk(id, i)).toBeDefined()
    // Every chunk served once, the answer of chunk 1 lost: the retry still finds it.
    expect(s.chunk(id, 1)?.byteLength).toBe(1_000)
    expect(s.size).toBe(1)
    s.finish(id)
    s.finish(id)
    expect(s.size).toBe(0)
    expect(s.chunk(id, 0)).toBeUndefined()
  })

  it('finish() forgets only once-blobs (a publication has many readers)', () => {
    const s = new BlobStore()
    const shared = s.put(bytes(10), 4, 60_000)
    s.finish(shared)
    expect(s.chunk(shared, 0)).toBeDefined()
    s.close()
  })

  it('keeps other blobs until they expire or are deleted', () => {
    vi.useFakeTimers()
    const s = new BlobStore()
    const a = s.put(bytes(10), 4, 1_000)
    const b = s.put(bytes(10), 4, 5_000)
    expect(s.chunk(a, 0)).toBeDefined()
    expect(s.chunk(a, 0)).toBeDefined() // served twice: not a once-blob
    expect(s.chunk(a, 3)).toBeUndefined() // out of range
    vi.advanceTimersByTime(1_001)
    expect(s.chunk(a, 0)).toBeUndefined()
    expect(s.chunk(b, 2)?.byteLength).toBe(2)
    s.delete(b)
    s.delete(b)
    expect(s.size).toBe(0)
  })

  it('close() drops everything, is idempotent, and refuses new blobs', () => {
    const s = new BlobStore()
    s.put(bytes(10), 4, 60_000)
    s.close()
    s.close()
    expect(s.size).toBe(0)
    expect(() => s.put(bytes(1), 1, 1)).toThrow(expect.objectContaining({ code: 'SHUTTING_DOWN' }))
  })
})
