/**
 * Per-request work, counted (not timed) for the budget tests (docs/architecture.md#per-request-budgets):
 * async resources by type (timers, immediates, promises, socket writes) from `async_hooks`, thread
 * hand-offs (`postMessage` on this thread), JSON parses and stringifies, msgpack encodes and
 * decodes, and copies of tensor bytes (@cohort/protocol's `wireCounts`). Counts do not depend on the machine's load, so the
 * budgets hold on a busy CI runner as on a quiet laptop.
 * @module
 */
import { createHook } from 'node:async_hooks'
import { Socket } from 'node:net'
import { MessagePort } from 'node:worker_threads'
import { wireCounts } from '@cohort/protocol'

/** What {@link countPerRequest} counts, per request. */
export interface RequestCounts {
  /** `setTimeout` / `setInterval` timers created (Node's own socket timers included). */
  timers: number
  /** `setImmediate` callbacks. */
  immediates: number
  /** Promises created (async_hooks PROMISE resources). */
  promises: number
  /** Writes handed to sockets (`_writeGeneric` / `_writev`: HTTP responses, NATS frames, client requests). */
  socketWrites: number
  /**
   * `postMessage` calls on this thread (hand-offs to ORT or predictor threads; their answers are
   * posted on those threads, not counted). `Worker#postMessage` forwards to its port's, so each
   * is counted once, on `MessagePort` (counting both counted every hand-off twice).
   */
  postMessages: number
  jsonParses: number
  jsonStringifies: number
  msgpackEncodes: number
  msgpackDecodes: number
  /** Copies of tensor bytes to join rows: `concatRows` when the rows are not adjacent, a runner's batch assembly. */
  tensorCopies: number
}

const ZERO: RequestCounts = {
  timers: 0,
  immediates: 0,
  promises: 0,
  socketWrites: 0,
  postMessages: 0,
  jsonParses: 0,
  jsonStringifies: 0,
  msgpackEncodes: 0,
  msgpackDecodes: 0,
  tensorCopies: 0,
}

const TYPE_KEY: Record<string, keyof RequestCounts> = {
  Timeout: 'timers',
  Immediate: 'immediates',
  PROMISE: 'promises',
}

/** MessagePort.prototype's postMessage as a function of its port (`this`): saved, called back with `.apply`, restored. */
type PortPost = { postMessage: (this: MessagePort, ...a: Parameters<MessagePort['postMessage']>) => void }
type SocketWrites = { _writeGeneric: (...a: unknown[]) => unknown; _writev: (...a: unknown[]) => unknown }

/**
 * Count what the process does while `body` runs: async resources, postMessages, JSON, socket
 * writes and the wire counters, into a fresh {@link RequestCounts} (totals, not per request).
 */
async function counted(body: () => Promise<void>): Promise<RequestCounts> {
  const c: RequestCounts = { ...ZERO }
  const hook = createHook({
    init(_id, type) {
      const k = TYPE_KEY[type]
      if (k !== undefined) {
        c[k]++
      }
    },
  })
  const { parse, stringify } = JSON
  const ppost = (MessagePort.prototype as PortPost).postMessage
  JSON.parse = function (this: unknown, ...a: Parameters<typeof parse>) {
    c.jsonParses++
    return parse.apply(this, a)
  } as typeof parse
  JSON.stringify = function (this: unknown, ...a: Parameters<typeof stringify>) {
    c.jsonStringifies++
    return stringify.apply(this, a)
  } as typeof stringify
  MessagePort.prototype.postMessage = function (this: MessagePort, ...a: Parameters<MessagePort['postMessage']>) {
    c.postMessages++
    ppost.apply(this, a)
  }
  const sp = Socket.prototype as unknown as SocketWrites
  const { _writeGeneric: writeGeneric, _writev: writev } = sp
  sp._writeGeneric = function (this: unknown, ...a: unknown[]) {
    c.socketWrites++
    return writeGeneric.apply(this, a)
  }
  sp._writev = function (this: unknown, ...a: unknown[]) {
    c.socketWrites++
    return writev.apply(this, a)
  }
  const w0 = { ...wireCounts }
  hook.enable()
  try {
    await body()
  } finally {
    hook.disable()
    JSON.parse = parse
    JSON.stringify = stringify
    MessagePort.prototype.postMessage = ppost
    sp._writeGeneric = writeGeneric
    sp._writev = writev
  }
  c.msgpackEncodes = wireCounts.encodes - w0.encodes
  c.msgpackDecodes = wireCounts.decodes - w0.decodes
  c.tensorCopies = wireCounts.copies - w0.copies
  return c
}

/** Longest idle window {@link countPerRequest} measures the background in, ms (scaled to the run's length). */
const BACKGROUND_MAX_MS = 2_000

/**
 * Run `one` `n` times in sequence (concurrency 1) after `warmup` runs, counting what the process
 * does meanwhile; returns the counts divided by `n`. Everything in the process is counted: the
 * client's own work too, so budgets are set against a floor measured the same way. The process's
 * background (heartbeats, liveness checks: work by the clock, not by request) is counted apart in an
 * idle window after the run, as long as the run (at most 2 s, scaled), and taken off: a loaded
 * machine that stretches the run does not charge the requests more heartbeats.
 */
export async function countPerRequest(one: () => Promise<unknown>, n = 50, warmup = 10): Promise<RequestCounts> {
  for (let i = 0; i < warmup; i++) {
    await one()
  }
  const t0 = performance.now()
  const c = await counted(async () => {
    for (let i = 0; i < n; i++) {
      await one()
    }
  })
  const runMs = performance.now() - t0
  const idleMs = Math.min(runMs, BACKGROUND_MAX_MS)
  const background = await counted(() => new Promise((r) => setTimeout(r, idleMs)))
  const scale = idleMs > 0 ? runMs / idleMs : 0
  const out = { ...c }
  for (const k of Object.keys(out) as (keyof RequestCounts)[]) {
    // The idle window's own timer and its promise are the window's, not the background's.
    const idle = Math.max(0, background[k] - (k === 'timers' || k === 'promises' ? 1 : 0))
    out[k] = Math.round(((c[k] - idle * scale) / n) * 100) / 100
  }
  return out
}

/** `a - b`, key by key (a path's counts above the floor's). */
export function countsAbove(a: RequestCounts, b: RequestCounts): RequestCounts {
  const out = { ...a }
  for (const k of Object.keys(out) as (keyof RequestCounts)[]) {
    out[k] = Math.round((a[k] - b[k]) * 100) / 100
  }
  return out
}
