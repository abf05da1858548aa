/**
 * Redis Streams ingress: a consumer-group reader of a request stream that sends each entry as one
 * item to the model's workers through the gateway's inference door (origin `bridge`: the same
 * admission, span, metrics, subjects and batching as HTTP traffic), then writes the Cog-shaped result to a results stream and a key and acks the entry, in
 * one atomic script. See docs/predictions.md#redis-streams-ingress.
 * @module
 */
import { randomUUID } from 'node:crypto'
import { CohortError, fromWire } from '@cohort/protocol'
import { newPrediction, PredictionLifecycle, type PredictionOutcome, type WebhookSender } from '@cohort/predictions'
import { DEFAULT_REQUEST_TIMEOUT_MS, type InferenceDoor } from '@cohort/gateway'
import { isTransient, parseEntry, resultFields, type BridgeEntry } from './entry.ts'

/** Default deadline of one bridge entry, retries included: a request's default deadline (30 s). */
export const DEFAULT_BRIDGE_TIMEOUT_MS = DEFAULT_REQUEST_TIMEOUT_MS
/** The bridge's defaults (`cohort bridge redis` shows these in its help). */
export const BRIDGE_DEFAULTS = Object.freeze({
  stream: 'cohort:requests',
  group: 'cohort',
  results: 'cohort:results',
  keyPrefix: 'cohort:result:',
  concurrency: 64,
  claimIdleMs: 60_000,
})

/** The one Redis call the bridge needs (ioredis' `call`). */
export interface RedisCaller {
  call(command: string, ...args: (string | number)[]): Promise<unknown>
}

/** Options of {@link RedisBridge}; durations in ms. */
export interface RedisBridgeOptions {
  /** Connection for writes, acks and claims. */
  redis: RedisCaller
  /** A second connection for the blocking XREADGROUP. */
  reader: RedisCaller
  /** The door of the bridge's gateway core (`createGatewayCore`). */
  door: InferenceDoor
  webhooks: WebhookSender
  /** Consumer name in the group (unique per bridge process). */
  consumer: string
  /** @default 'cohort:requests' */
  stream?: string
  /** @default 'cohort' */
  group?: string
  /** @default 'cohort:results' */
  results?: string
  /** Result key prefix; the key is prefix + id. @default 'cohort:result:' */
  keyPrefix?: string
  /** Entries in flight at once. @default 64 */
  concurrency?: number
  /** Entries pending this long on any consumer (a dead bridge) are claimed. @default 60000 */
  claimIdleMs?: number
  /** Deadline of one entry, retries of transient errors included. @default 30000 */
  timeoutMs?: number
  /** BLOCK of one XREADGROUP: how soon a stop is noticed. @default 1000 */
  blockMs?: number
  log?: (msg: string) => void
}

/** Counters since start. */
export interface BridgeStats {
  read: number
  succeeded: number
  failed: number
  /** Entries whose id already had a result: acked without running. */
  duplicates: number
  /** Entries claimed from other (dead) consumers. */
  claimed: number
}

// Atomic: result key, result entry and ack together, unless the id already has a result (then ack only).
// KEYS: result key, results stream, request stream. ARGV: group, entry id, record JSON, result fields...
const WRITE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
  return 0
end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
return 1
`

type RawEntry = [string, string[] | null]

/** The bridge. `start()` then `stop()` (idempotent: stop reading, finish in-flight entries, ack). */
export class RedisBridge {
  readonly stats: BridgeStats = { read: 0, succeeded: 0, failed: 0, duplicates: 0, claimed: 0 }
  readonly #o: Required<Omit<RedisBridgeOptions, 'log'>> & Pick<RedisBridgeOptions, 'log'>
  readonly #inflight = new Map<string, Promise<void>>()
  readonly #timers: ReturnType<typeof setInterval>[] = []
  #stopping = false
  /** Whether stop() was called (a method, so a loop across awaits reads it afresh). */
  #stopRequested(): boolean {
    return this.#stopping
  }
  #loop: Promise<void> | undefined
  #stopped: Promise<void> | undefined
  #claiming = false
  #wake: (() => void) | undefined
  readonly #life: PredictionLifecycle

  constructor(o: RedisBridgeOptions) {
    this.#life = new PredictionLifecycle(o.webhooks)
    this.#o = {
      ...BRIDGE_DEFAULTS,
      timeoutMs: DEFAULT_BRIDGE_TIMEOUT_MS,
      blockMs: 1_000,
      ...o,
    }
  }

  /** Create the group (MKSTREAM, from the stream's start) if missing, then read in the background. */
  async start(): Promise<void> {
    const o = this.#o
    try {
      await o.redis.call('XGROUP', 'CREATE', o.stream, o.group, '0', 'MKSTREAM')
    } catch (e) {
      if (!String(e instanceof Error ? e.message : e).includes('BUSYGROUP')) {
        throw e
      }
    }
    const claimEvery = Math.max(100, Math.floor(o.claimIdleMs / 2))
    const beatEvery = Math.max(100, Math.floor(o.claimIdleMs / 3))
    this.#timers.push(setInterval(() => void this.#claim(), claimEvery))
    this.#timers.push(setInterval(() => void this.#heartbeat(), beatEvery))
    this.#loop = this.#run()
  }

  /** Entries in flight now. */
  get inFlight(): number {
    return this.#inflight.size
  }

  /** Stop reading and claiming, finish the entries in flight (results written, acked). Idempotent. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopping = true
      for (const t of this.#timers) {
        clearInterval(t)
      }
      this.#wake?.()
      await this.#loop
      while (this.#inflight.size > 0) {
        await Promise.all([...this.#inflight.values()])
      }
    })()
    return this.#stopped
  }

  async #run(): Promise<void> {
    const o = this.#o
    // This consumer's own pending entries first (a restart under the same --consumer name).
    let own = true
    while (!this.#stopping) {
      const free = o.concurrency - this.#inflight.size
      if (free <= 0) {
        await new Promise<void>((r) => {
          this.#wake = r
          void Promise.race(this.#inflight.values()).then(r)
        })
        this.#wake = undefined
        continue
      }
      let r: unknown
      try {
        r = await o.reader.call('XREADGROUP', 'GROUP', o.group, o.consumer, 'COUNT', free, 'BLOCK', o.blockMs, 'STREAMS', o.stream, own ? '0' : '>')
      } catch (e) {
        o.log?.(`XREADGROUP failed: ${msg(e)}; retrying in 1 s`)
        await sleep(1000)
        continue
      }
      const entries = streamEntries(r)
      own = false // one pass over our own history; more of it is claimed after claimIdleMs
      for (const [id, fields] of entries) {
        this.#dispatch(id, fields)
      }
    }
  }

  /** Take over entries idle for claimIdleMs on any consumer (one that died), up to the free slots. */
  async #claim(): Promise<void> {
    const o = this.#o
    if (this.#claiming || this.#stopping) {
      return
    }
    this.#claiming = true
    try {
      let cursor = '0-0'
      for (;;) {
        const free = o.concurrency - this.#inflight.size
        // stop() may have run while this loop awaited Redis: a fresh read.
        if (free <= 0 || this.#stopRequested()) {
          return
        }
        const r = await o.redis.call('XAUTOCLAIM', o.stream, o.group, o.consumer, o.claimIdleMs, cursor, 'COUNT', free)
        const reply: unknown[] = Array.isArray(r) ? r : []
        const entries = (Array.isArray(reply[1]) ? reply[1] : []) as (RawEntry | null)[]
        for (const e of entries) {
          if (Array.isArray(e) && !this.#inflight.has(e[0])) {
            this.stats.claimed++
            this.#dispatch(e[0], e[1])
          }
        }
        cursor = typeof reply[0] === 'string' ? reply[0] : '0-0'
        if (cursor === '0-0') {
          return
        }
      }
    } catch (e) {
      o.log?.(`XAUTOCLAIM failed: ${msg(e)}`)
    } finally {
      this.#claiming = false
    }
  }

  /** Reset the idle time of the entries in flight, so that other bridges do not claim them. */
  async #heartbeat(): Promise<void> {
    const o = this.#o
    const ids = [...this.#inflight.keys()]
    if (ids.length === 0) {
      return
    }
    await o.redis.call('XCLAIM', o.stream, o.group, o.consumer, 0, ...ids, 'JUSTID').catch((e: unknown) => o.log?.(`XCLAIM failed: ${msg(e)}`))
  }

  #dispatch(streamId: string, fields: string[] | null): void {
    if (this.#inflight.has(streamId)) {
      return
    }
    const p = this.#handle(streamId, fields)
      .catch((e: unknown) => this.#o.log?.(`entry ${streamId}: ${msg(e)} (left pending; claimed again after ${this.#o.claimIdleMs} ms)`))
      .finally(() => this.#inflight.delete(streamId))
    this.#inflight.set(streamId, p)
  }

  async #handle(streamId: string, fields: string[] | null): Promise<void> {
    const o = this.#o
    if (fields === null) {
      await o.redis.call('XACK', o.stream, o.group, streamId) // deleted from the stream: nothing to run
      return
    }
    this.stats.read++
    const e = parseEntry(streamId, fields)
    const key = o.keyPrefix + e.id
    if (Number(await o.redis.call('EXISTS', key)) === 1) {
      await o.redis.call('XACK', o.stream, o.group, streamId)
      this.stats.duplicates++
      return
    }
    const started = this.#life.start(newPrediction({ id: e.id, model: e.model, input: e.input, webhook: e.webhook }))
    this.#life.started(started)
    const r = await this.#run1(e)
    if (r === 'abandon') {
      return // stopping with a transient error: left pending for another bridge
    }
    const done = this.#life.finish(started, r)
    const written = await o.redis.call('EVAL', WRITE_SCRIPT, 3, key, o.results, o.stream, o.group, streamId, JSON.stringify(done), ...resultFields(done))
    if (Number(written) !== 1) {
      this.stats.duplicates++
      return
    }
    if (done.status === 'succeeded') {
      this.stats.succeeded++
    } else {
      this.stats.failed++
    }
    this.#life.finished(done)
  }

  /** Run one entry: its output, or its error; transient errors are retried until the deadline. */
  async #run1(e: BridgeEntry): Promise<PredictionOutcome | 'abandon'> {
    if (e.error) {
      return { error: e.error.toWire() }
    }
    const deadline = Date.now() + this.#o.timeoutMs
    for (;;) {
      try {
        // Through the gateway's inference door: admission, deadline plus its reply grace, resend on
        // worker loss. A transient refusal (an admission 503 among them) is retried here until the deadline.
        const out = await this.#o.door.predict({ origin: 'bridge', route: 'bridge redis', model: e.model, input: e.input, deadline, id: randomUUID(), retryable: true })
        if (out.error && isTransient(fromWire(out.error))) {
          throw fromWire(out.error)
        }
        return out
      } catch (err) {
        if (isTransient(err)) {
          if (this.#stopping) {
            return 'abandon'
          }
          if (Date.now() + 1000 < deadline) {
            await sleep(Math.min(1000, ((err as CohortError).retryAfterS ?? 1) * 1000))
            continue
          }
        }
        const ce = err instanceof CohortError ? err : new CohortError('INTERNAL', msg(err))
        return { error: { code: ce.code, message: ce.message } }
      }
    }
  }
}

/** Entries of the first stream in an XREADGROUP reply (null: none). */
function streamEntries(r: unknown): [string, string[] | null][] {
  if (!Array.isArray(r) || r.length === 0) {
    return []
  }
  const first: unknown = r[0]
  if (!Array.isArray(first) || !Array.isArray(first[1])) {
    return []
  }
  const entries: unknown[] = first[1]
  return entries.filter((x) => Array.isArray(x)).map((x) => [String(x[0]), Array.isArray(x[1]) ? x[1].map(String) : null])
}

function msg(e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}
