/**
 * Large messages over a bus with a small `max_payload`: the sender keeps the bytes (a "blob") and
 * sends a small reference; the receiver pulls the blob chunk by chunk from the sender and puts it
 * back together. Pure: no sockets, no timers beyond `setTimeout`; the NATS wiring is in `nats/large.ts`.
 * @see docs/protocol.md#large-messages
 * @module
 */
import { CohortError, isErrorCode } from '@cohort/protocol'

/** Header of a message whose body travels as a blob: its {@link BlobRef}, see {@link formatBlobRef}. */
export const BLOB_HEADER = 'Cohort-Blob'
/** Header of a reply that reports a failed transfer: `CODE message`. */
export const BLOB_ERROR_HEADER = 'Cohort-Blob-Error'

/** Where and how a blob can be pulled. */
export interface BlobRef {
  /** Subject the sender answers chunk requests on (one per blob; the request body is the chunk index). */
  readonly subject: string
  /** Total size in bytes. */
  readonly size: number
  /** Size of every chunk but the last, in bytes. */
  readonly chunkSize: number
  /** The sender keeps the blob at least this long after sending the reference, in ms. */
  readonly ttlMs: number
}

/** The header value of a reference: `v1 <subject> <size> <chunkSize> <ttlMs>`. */
export function formatBlobRef(r: BlobRef): string {
  return `v1 ${r.subject} ${r.size} ${r.chunkSize} ${Math.max(1, Math.round(r.ttlMs))}`
}

/** Parse a reference header; throws CohortError BAD_REQUEST when it is malformed. */
export function parseBlobRef(s: string): BlobRef {
  const p = s.trim().split(/\s+/)
  const [v, subject, size, chunkSize, ttlMs] = [p[0], p[1], Number(p[2]), Number(p[3]), Number(p[4])]
  if (p.length !== 5 || v !== 'v1' || !subject || !Number.isSafeInteger(size) || size < 0 || !Number.isSafeInteger(chunkSize) || chunkSize < 1 || !(ttlMs > 0)) {
    throw new CohortError('BAD_REQUEST', `malformed ${BLOB_HEADER} header: ${JSON.stringify(s.slice(0, 200))}`)
  }
  return { subject, size, chunkSize, ttlMs }
}

/** Number of chunks of a blob of `size` bytes (at least 1: an empty blob is one empty chunk). */
export function chunkCount(size: number, chunkSize: number): number {
  return Math.max(1, Math.ceil(size / chunkSize))
}

/** Byte range `[start, end)` of chunk `i`. */
export function chunkRange(size: number, chunkSize: number, i: number): [number, number] {
  const start = i * chunkSize
  return [start, Math.min(size, start + chunkSize)]
}

/** Format a transfer failure for {@link BLOB_ERROR_HEADER}. */
export function formatBlobError(e: unknown): string {
  const code = e instanceof CohortError ? e.code : 'BLOB_UNAVAILABLE'
  const msg = e instanceof Error ? e.message : String(e)
  return `${code} ${msg.replace(/[\r\n]+/g, ' ').slice(0, 500)}`
}

/** Turn a {@link BLOB_ERROR_HEADER} value back into the CohortError it reported. */
export function parseBlobError(s: string): CohortError {
  const i = s.indexOf(' ')
  const code = i < 0 ? s : s.slice(0, i)
  const msg = i < 0 ? 'large message transfer failed' : s.slice(i + 1)
  return new CohortError(isErrorCode(code) ? code : 'BLOB_UNAVAILABLE', msg)
}

/** Options of {@link BlobStore}. */
export interface BlobStoreOptions {
  /** Make blob ids unique across stores (a NATS inbox suffices). */
  readonly prefix?: string
}

interface Stored {
  readonly data: Uint8Array
  readonly chunkSize: number
  readonly timer: ReturnType<typeof setTimeout>
  /** Goes away when its one reader says it is done ({@link BlobStore.finish}). */
  readonly once: boolean
}

/**
 * The sender's side: blobs kept until they expire, or (`once`) until their reader says it has
 * them all. A chunk whose answer was lost can be asked for again until then.
 */
export class BlobStore {
  readonly #blobs = new Map<string, Stored>()
  #next = 0
  #closed = false

  /**
   * Keep `data` for `ttlMs` and return its id. With `once` (a reply: exactly one reader), it goes
   * away when the reader says it is done ({@link finish}); otherwise only on expiry or {@link delete}.
   */
  put(data: Uint8Array, chunkSize: number, ttlMs: number, once = false): string {
    if (this.#closed) {
      throw new CohortError('SHUTTING_DOWN', 'the transport is closed')
    }
    const id = `b${(this.#next++).toString(36)}`
    const timer = setTimeout(() => this.#blobs.delete(id), Math.max(1, ttlMs))
    this.#blobs.set(id, { data, chunkSize, timer, once })
    return id
  }

  /** The reader of blob `id` has every chunk: forget it if it had one reader (`once`). Idempotent. */
  finish(id: string): void {
    if (this.#blobs.get(id)?.once) {
      this.delete(id)
    }
  }

  /** Chunk `index` of blob `id`; undefined when the blob is gone or the index is out of range. */
  chunk(id: string, index: number): Uint8Array | undefined {
    const b = this.#blobs.get(id)
    if (!b || !Number.isSafeInteger(index) || index < 0 || index >= chunkCount(b.data.byteLength, b.chunkSize)) {
      return undefined
    }
    const [start, end] = chunkRange(b.data.byteLength, b.chunkSize, index)
    return b.data.subarray(start, end)
  }

  /** Forget a blob (idempotent). */
  delete(id: string): void {
    const b = this.#blobs.get(id)
    if (b) {
      clearTimeout(b.timer)
      this.#blobs.delete(id)
    }
  }

  /** Number of blobs held. */
  get size(): number {
    return this.#blobs.size
  }

  /** Drop every blob and refuse new ones. Idempotent. */
  close(): void {
    this.#closed = true
    for (const id of [...this.#blobs.keys()]) {
      this.delete(id)
    }
  }
}

/** Pull one chunk: resolve with its bytes, reject on any failure; `timeoutMs` is what is left. */
export type ChunkFetcher = (index: number, timeoutMs: number) => Promise<Uint8Array>

/** Options of {@link fetchBlob}. */
export interface FetchBlobOptions {
  /** Refuse blobs larger than this (PAYLOAD_TOO_LARGE) before pulling anything. */
  readonly maxBytes: number
  /** Chunk requests in flight at once. @default 4 */
  readonly window?: number
  /** Give up after this many ms even if the reference allows more. @default the reference's ttlMs */
  readonly timeoutMs?: number
  /**
   * Tries per chunk: a chunk whose answer did not come (lost, timed out, the request failed) is
   * asked for again, up to this many times in all; an error the sender reports is final. @default 3
   */
  readonly attempts?: number
  /** How long one try of one chunk waits for its answer, in ms (capped by the time left). @default 2000 */
  readonly chunkTimeoutMs?: number
}

/** Default tries per chunk ({@link FetchBlobOptions.attempts}). */
export const DEFAULT_CHUNK_ATTEMPTS = 3
/** Default wait of one try of one chunk, in ms ({@link FetchBlobOptions.chunkTimeoutMs}). */
export const DEFAULT_CHUNK_TIMEOUT_MS = 2000

/**
 * Pull every chunk of `ref` through `fetch` and reassemble the blob. Rejects with CohortError
 * BLOB_UNAVAILABLE when a chunk fails, comes back with the wrong length, or the time runs out
 * (the wait is bounded by its own timer, so a fetcher that never settles cannot hang it), and
 * with PAYLOAD_TOO_LARGE when the blob exceeds `maxBytes`.
 */
export async function fetchBlob(ref: BlobRef, fetch: ChunkFetcher, o: FetchBlobOptions): Promise<Uint8Array> {
  if (ref.size > o.maxBytes) {
    throw new CohortError('PAYLOAD_TOO_LARGE', `message of ${ref.size} bytes exceeds the bus limit (maxMessageBytes) of ${o.maxBytes} bytes`)
  }
  const budget = Math.max(1, Math.min(ref.ttlMs, o.timeoutMs ?? ref.ttlMs))
  const deadline = Date.now() + budget
  const n = chunkCount(ref.size, ref.chunkSize)
  const out = new Uint8Array(ref.size)
  let timer: ReturnType<typeof setTimeout> | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CohortError('BLOB_UNAVAILABLE', `large message of ${ref.size} bytes not received within ${Math.round(budget)} ms`)), budget)
  })
  let next = 0
  let failed = false
  const attempts = Math.max(1, o.attempts ?? DEFAULT_CHUNK_ATTEMPTS)
  const perTry = Math.max(1, o.chunkTimeoutMs ?? DEFAULT_CHUNK_TIMEOUT_MS)
  /** One chunk, tried again when its answer does not come; a CohortError is the sender's word: final. */
  const pull = async (i: number): Promise<Uint8Array> => {
    for (let k = 1; ; k++) {
      try {
        return await fetch(i, Math.max(1, Math.min(perTry, deadline - Date.now())))
      } catch (e) {
        if (e instanceof CohortError || k >= attempts || failed || deadline - Date.now() <= 0) {
          throw e
        }
      }
    }
  }
  const one = async (i: number): Promise<void> => {
    let chunk: Uint8Array
    try {
      chunk = await pull(i)
    } catch (e) {
      throw e instanceof CohortError && e.code === 'BLOB_UNAVAILABLE'
        ? e
        : new CohortError('BLOB_UNAVAILABLE', `chunk ${i + 1}/${n} of a ${ref.size}-byte message: ${messageOf(e)}`, {
            cause: e,
          })
    }
    const [start, end] = chunkRange(ref.size, ref.chunkSize, i)
    if (chunk.byteLength !== end - start) {
      throw new CohortError('BLOB_UNAVAILABLE', `chunk ${i + 1}/${n} of a ${ref.size}-byte message has ${chunk.byteLength} bytes, expected ${end - start}`)
    }
    out.set(chunk, start)
  }
  const lane = async (): Promise<void> => {
    while (!failed && next < n) {
      const i = next++
      try {
        await one(i)
      } catch (e) {
        failed = true
        throw e
      }
    }
  }
  const lanes = Array.from({ length: Math.min(n, Math.max(1, o.window ?? 4)) }, lane)
  try {
    await Promise.race([Promise.all(lanes), expired])
    return out
  } finally {
    clearTimeout(timer)
    expired.catch(() => undefined)
    for (const l of lanes) {
      l.catch(() => undefined)
    }
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}
