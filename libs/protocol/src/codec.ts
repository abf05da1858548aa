/**
 * msgpack encoding of the envelopes (standard maps, no msgpackr records) with validating decoders:
 * anything malformed throws `CohortError('BAD_REQUEST')`, never a TypeError or RangeError.
 * @module
 */
import { Packr, type Options } from 'msgpackr'
import {
  ENVELOPE_VERSION,
  MAX_WAIT_TENANTS,
  type WaitEstimate,
  type AcceptNotice,
  type GatewayNotice,
  type InferPack,
  type CancelNotice,
  type Heartbeat,
  type InferReply,
  type InferRequest,
  type ItemTiming,
  type WireError,
} from './envelope.ts'
import { wireCounts } from './wire-counts.ts'
import { CohortError } from './errors.ts'
import { checkTensor, safeString } from './tensor-data.ts'
import { generateFrom, generatedFrom, tokenStepsFrom } from './generate-codec.ts'
import type { WireTensor } from './tensor.ts'
import { isValidVersion } from './subjects.ts'

/**
 * Standard msgpack only: maps (no records), Uint8Array as `bin` (decoded as views of the input),
 * `undefined` properties omitted, 64-bit integers decoded as numbers when safe (bigint otherwise),
 * structured-clone references refused.
 */
const options = {
  useRecords: false,
  moreTypes: false,
  structuredClone: false,
  mapsAsObjects: true,
  encodeUndefinedAsNil: true,
  skipValues: [undefined],
  int64AsType: 'auto', // accepted by msgpackr 2.1.4 but missing from its typings, as is skipValues
}
const packr = new Packr(options as unknown as Options)

const bad = (message: string): CohortError => new CohortError('BAD_REQUEST', message)

type Obj = Record<string, unknown>

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date)

/** Encodings larger than this (bytes) get a buffer of their own; see {@link pack}. */
export const EXACT_ENCODING_ABOVE = 1024 * 1024

/**
 * A buffer of the kind msgpackr allocates itself: a Node `Buffer` where the runtime has one (its
 * string writer needs `utf8Write`), else a Uint8Array. Feature detection only; no Node import.
 */
function allocTarget(n: number): Uint8Array {
  const B = (globalThis as { Buffer?: { allocUnsafeSlow(n: number): Uint8Array } }).Buffer
  return B ? B.allocUnsafeSlow(n) : new Uint8Array(n)
}

/** Room for everything but the tensor bytes of a large envelope (ids, names, shapes, items). */
const ENVELOPE_SLACK = 64 * 1024

/**
 * `packr.pack` into msgpackr's shared buffer, except for large messages: given `bytesHint` (the
 * tensor bytes it carries) above {@link EXACT_ENCODING_ABOVE}, it packs into a buffer of about that
 * size made for it, so the encoder never grows (and copies) its buffer in steps of 2-4x; a large
 * result without a hint is copied into a buffer of its own size. Either way the shared buffer stays
 * small afterwards: a large message holds about its own size (a binary body and its message, 2x),
 * and one large message does not keep a buffer twice its size alive for the life of the process.
 */
export { wireCounts } from './wire-counts.ts'

function pack(v: unknown, bytesHint = 0): Uint8Array {
  wireCounts.encodes++
  if (bytesHint > EXACT_ENCODING_ABOVE) {
    packr.useBuffer(allocTarget(bytesHint + ENVELOPE_SLACK))
    try {
      return packr.pack(v)
    } finally {
      packr.useBuffer(allocTarget(ENVELOPE_SLACK))
    }
  }
  const out = packr.pack(v)
  if (out.byteLength <= EXACT_ENCODING_ABOVE) {
    return out
  }
  const exact = new Uint8Array(out.byteLength)
  exact.set(out)
  packr.useBuffer(allocTarget(ENVELOPE_SLACK))
  return exact
}

/** Summed tensor bytes of an envelope (the size hint of {@link pack}). */
function tensorBytes(t: Record<string, WireTensor> | undefined): number {
  let n = 0
  for (const k in t) {
    n += t[k]?.bytes.byteLength ?? 0
  }
  return n
}

/** Encode any value as msgpack (for metadata and discovery answers). The result may view a shared buffer. */
export function encodeValue(v: unknown): Uint8Array {
  return pack(v)
}

/** Decode msgpack bytes; garbage, truncation or trailing bytes throw BAD_REQUEST. `bin` values view `buf`. */
export function decodeValue(buf: Uint8Array): unknown {
  if (!(buf instanceof Uint8Array)) {
    throw bad('message must be binary')
  }
  wireCounts.decodes++
  try {
    return packr.unpack(buf)
  } catch (e) {
    throw bad(`message is not valid msgpack: ${e instanceof Error ? e.message : String(e)}`)
  }
}

function envelope(buf: Uint8Array, what: string): Obj {
  const o = decodeValue(buf)
  if (!isObj(o)) {
    throw bad(`${what} must be a msgpack map`)
  }
  if (o.v !== ENVELOPE_VERSION) {
    throw bad(`${what}.v must be ${ENVELOPE_VERSION}, got ${safeString(o.v).slice(0, 20)}`)
  }
  if (typeof o.id !== 'string') {
    throw bad(`${what}.id must be a string`)
  }
  return o
}

function optional<T>(o: Obj, key: string, what: string, ok: (v: unknown) => v is T, kind: string): T | undefined {
  const v = o[key]
  if (v === undefined || v === null) {
    return undefined
  }
  if (!ok(v)) {
    throw bad(`${what}.${key} must be ${kind}`)
  }
  return v
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)
const isString = (v: unknown): v is string => typeof v === 'string'
const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString)
const isWireError = (v: unknown): v is WireError => isObj(v) && typeof v.code === 'string' && typeof v.message === 'string'

/** The known fields of a wire error; `retryAfterS` only when it is a finite number >= 0. */
function copyWireError(e: WireError): WireError {
  const out: WireError = { code: e.code, message: e.message }
  const ra = e.retryAfterS
  if (typeof ra === 'number' && Number.isFinite(ra) && ra >= 0) out.retryAfterS = ra
  return out
}
const isTiming = (v: unknown): v is ItemTiming => isObj(v) && isNum(v.queueMs) && isNum(v.computeMs) && isNum(v.batchSize)

/** Validate a tensor map; returns fresh tensors and the common shape[0] (undefined when empty). */
/** Names whose JSON form is themselves in quotes, short enough not to be cut at 80 characters. */
const PLAIN_NAME = /^[\w.:/ -]{0,78}$/

function tensorsOf(v: unknown, what: string): [Record<string, WireTensor>, number | undefined] {
  if (!isObj(v)) {
    throw bad(`${what}.tensors must be a map of name -> tensor`)
  }
  const entries: [string, WireTensor][] = []
  let rows: number | undefined
  for (const [name, raw] of Object.entries(v)) {
    // JSON.stringify(name) is the name in quotes for plain names: no stringify per tensor per message.
    const label = `${what}.tensors[${PLAIN_NAME.test(name) ? `"${name}"` : JSON.stringify(name).slice(0, 80)}]`
    const t = checkTensor(raw, label)
    if (t.shape.length === 0) {
      throw bad(`${label} must be batch-major (rank >= 1), got a scalar`)
    }
    if (rows !== undefined && t.shape[0] !== rows) {
      throw bad(`${label} has ${t.shape[0]} rows but another tensor has ${rows}; shape[0] must agree`)
    }
    rows = t.shape[0]
    entries.push([name, t])
  }
  return [Object.fromEntries(entries), rows]
}

/**
 * Items in a request: the common shape[0] of `tensors` or the length of `items`. Exactly one of them
 * must be present and tensors must agree on shape[0] (BAD_REQUEST otherwise).
 */
export function requestItemCount(r: InferRequest): number {
  const { tensors, items } = r
  if (tensors === undefined) {
    if (items === undefined) {
      throw bad('request has neither tensors nor items')
    }
    if (!Array.isArray(items)) {
      throw bad('request.items must be an array')
    }
    return items.length
  }
  if (items !== undefined) {
    throw bad('request has both tensors and items')
  }
  let rows: number | undefined
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape[0]
    if (n === undefined) {
      throw bad(`request tensor ${JSON.stringify(name)} must be batch-major (rank >= 1)`)
    }
    if (rows !== undefined && n !== rows) {
      throw bad(`request tensors disagree on shape[0]: ${rows} vs ${n} (${JSON.stringify(name)})`)
    }
    rows = n
  }
  if (rows === undefined) {
    throw bad('request.tensors is empty')
  }
  return rows
}

/** Encode an inference request. */
export function encodeRequest(r: InferRequest): Uint8Array {
  return pack(r, tensorBytes(r.tensors))
}

/** Decode and validate an inference request (see module docs); tensor bytes view `buf`. */
export function decodeRequest(buf: Uint8Array): InferRequest {
  return requestFrom(envelope(buf, 'request'), 'request')
}

function requestFrom(o: Obj, what: string): InferRequest {
  if (typeof o.model !== 'string') {
    throw bad(`${what}.model must be a string`)
  }
  if (!isNum(o.deadline)) {
    throw bad(`${what}.deadline must be a finite number (epoch ms)`)
  }
  const r: InferRequest = { v: ENVELOPE_VERSION, id: o.id as string, model: o.model, deadline: o.deadline }
  const traceparent = optional<string>(o, 'traceparent', what, isString, 'a string')
  if (traceparent !== undefined) r.traceparent = traceparent
  const tracestate = optional<string>(o, 'tracestate', what, isString, 'a string')
  if (tracestate !== undefined) r.tracestate = tracestate
  const priority = optional<number>(o, 'priority', what, isNum, 'a finite number')
  if (priority !== undefined) r.priority = priority
  const tenant = optional<string>(o, 'tenant', what, (v): v is string => typeof v === 'string' && v.length <= 128, 'a string of at most 128 characters')
  if (tenant !== undefined) r.tenant = tenant
  const outputs = optional<string[]>(o, 'outputs', what, isStringArray, 'an array of strings')
  if (outputs !== undefined) r.outputs = outputs
  if (o.tensors !== undefined && o.tensors !== null) r.tensors = tensorsOf(o.tensors, what)[0]
  const items = optional<unknown[]>(o, 'items', what, Array.isArray, 'an array')
  if (items !== undefined) r.items = items
  const ack = optional<string>(o, 'ack', what, isString, 'a string')
  if (ack !== undefined) r.ack = ack
  const version = optional<string>(o, 'version', what, (x): x is string => typeof x === 'string' && isValidVersion(x), 'a version ("1", "2", ...)')
  if (version !== undefined) r.version = version
  if (o.generate !== undefined && o.generate !== null) {
    // A generation carries its prompt in `generate`, never tensors or items.
    if (r.tensors !== undefined || r.items !== undefined) {
      throw bad(`${what} has generate and ${r.tensors !== undefined ? 'tensors' : 'items'}; a generation carries only generate`)
    }
    r.generate = generateFrom(o.generate, `${what}.generate`)
    return r
  }
  requestItemCount(r)
  return r
}

/** Encode a worker reply. */
export function encodeReply(r: InferReply): Uint8Array {
  return pack(r)
}

/**
 * Decode and validate a worker reply. Per-item fields (`tensors` shape[0], `items`, `errors`, `timing`)
 * must agree on the item count when present.
 */
export function decodeReply(buf: Uint8Array): InferReply {
  return replyFrom(decodeValue(buf))
}

/** {@link decodeReply} of a value already decoded or carried without encoding (see {@link inferMessageFrom}). */
export function replyFrom(v: unknown): InferReply {
  const what = 'reply'
  if (!isObj(v)) {
    throw bad(`${what} must be a msgpack map`)
  }
  if (v.v !== ENVELOPE_VERSION) {
    throw bad(`${what}.v must be ${ENVELOPE_VERSION}, got ${safeString(v.v).slice(0, 20)}`)
  }
  if (typeof v.id !== 'string') {
    throw bad(`${what}.id must be a string`)
  }
  const o = v
  const r: InferReply = { v: ENVELOPE_VERSION, id: o.id as string }
  const error = optional<WireError>(o, 'error', what, isWireError, 'a {code, message} map')
  if (error !== undefined) r.error = copyWireError(error)
  const counts: [string, number][] = []
  if (o.tensors !== undefined && o.tensors !== null) {
    const [tensors, rows] = tensorsOf(o.tensors, what)
    r.tensors = tensors
    if (rows !== undefined) counts.push(['tensors', rows])
  }
  const items = optional<unknown[]>(o, 'items', what, Array.isArray, 'an array')
  if (items !== undefined) {
    r.items = items
    counts.push(['items', items.length])
  }
  const isErrors = (v: unknown): v is (WireError | null)[] => Array.isArray(v) && v.every((e) => e === null || isWireError(e))
  const errors = optional<(WireError | null)[]>(o, 'errors', what, isErrors, 'an array of null or {code, message}')
  if (errors !== undefined) {
    r.errors = errors.map((e) => (e === null ? null : copyWireError(e)))
    counts.push(['errors', errors.length])
  }
  const isTimings = (v: unknown): v is ItemTiming[] => Array.isArray(v) && v.every(isTiming)
  const timing = optional<ItemTiming[]>(o, 'timing', what, isTimings, 'an array of {queueMs, computeMs, batchSize}')
  if (timing !== undefined) {
    r.timing = timing.map((t) => ({ queueMs: t.queueMs, computeMs: t.computeMs, batchSize: t.batchSize }))
    counts.push(['timing', timing.length])
  }
  const [first] = counts
  for (const [k, n] of counts) {
    if (first !== undefined && n !== first[1]) {
      throw bad(`${what}.${k} has ${n} items but ${what}.${first[0]} has ${first[1]}`)
    }
  }
  const worker = optional<string>(o, 'worker', what, isString, 'a string')
  if (worker !== undefined) r.worker = worker
  const version = optional<string>(o, 'version', what, (x): x is string => typeof x === 'string' && isValidVersion(x), 'a version ("1", "2", ...)')
  if (version !== undefined) r.version = version
  if (o.generated !== undefined && o.generated !== null) r.generated = generatedFrom(o.generated, `${what}.generated`)
  return r
}

/** Encode a cancellation notice. */
export function encodeCancel(c: CancelNotice): Uint8Array {
  return pack(c)
}

/** Decode and validate a cancellation notice. */
export function decodeCancel(buf: Uint8Array): CancelNotice {
  return { v: ENVELOPE_VERSION, id: envelope(buf, 'cancel').id as string }
}

/** Encode an acceptance notice. */
export function encodeAccept(a: AcceptNotice): Uint8Array {
  return pack(a)
}

/** Decode and validate an acceptance notice. */
export function decodeAccept(buf: Uint8Array): AcceptNotice {
  const o = envelope(buf, 'accept')
  if (typeof o.worker !== 'string') {
    throw bad('accept.worker must be a string')
  }
  return { v: ENVELOPE_VERSION, id: o.id as string, worker: o.worker }
}

/** Encode a worker heartbeat. */
export function encodeHeartbeat(h: Heartbeat): Uint8Array {
  return pack(h)
}

/** Decode and validate a worker heartbeat. */
export function decodeHeartbeat(buf: Uint8Array): Heartbeat {
  const o = envelope(buf, 'heartbeat')
  if (!isNum(o.intervalMs) || o.intervalMs <= 0) {
    throw bad('heartbeat.intervalMs must be a number > 0')
  }
  const h: Heartbeat = { v: ENVELOPE_VERSION, id: o.id as string, intervalMs: o.intervalMs }
  if (o.bye === true) h.bye = true
  if (isNum(o.proto)) h.proto = o.proto
  if (isObj(o.models)) {
    const models: Record<string, WaitEstimate> = {}
    for (const [m, e] of Object.entries(o.models)) {
      const w = waitEstimateFrom(e)
      if (w) models[m] = w
    }
    h.models = models
  }
  if (Array.isArray(o.stalled)) {
    const stalled = (o.stalled as unknown[]).filter((m): m is string => typeof m === 'string')
    if (stalled.length > 0) h.stalled = stalled
  }
  return h
}

/** A {@link WaitEstimate} from a decoded value; undefined when malformed (old or foreign senders: ignored, never fatal). */
function waitEstimateFrom(e: unknown): WaitEstimate | undefined {
  if (!isObj(e) || !isNum(e.queued) || !isNum(e.waitMs) || !isNum(e.serviceMs)) {
    return undefined
  }
  const w: WaitEstimate = { queued: e.queued, waitMs: e.waitMs, serviceMs: e.serviceMs }
  if (isNum(e.itemMs)) w.itemMs = e.itemMs
  if (isNum(e.aloneMs)) w.aloneMs = e.aloneMs
  const t = tenantWaits(e.tenants)
  if (t) w.tenants = t
  return w
}

/** Per-tenant waits (at most {@link MAX_WAIT_TENANTS}, numbers only). */
function tenantWaits(v: unknown): Record<string, number> | undefined {
  if (!isObj(v)) {
    return undefined
  }
  const out: Record<string, number> = {}
  let n = 0
  for (const [k, ms] of Object.entries(v)) {
    if (isNum(ms) && n < MAX_WAIT_TENANTS) {
      out[k] = ms
      n++
    }
  }
  return out
}

/** Largest number of requests in one {@link InferPack}. */
export const MAX_PACK_REQUESTS = 256

/** Encode a pack of requests (protocol v2). */
export function encodePack(p: InferPack): Uint8Array {
  wireCounts.encodes++
  return packr.pack(p)
}

/** Bytes of an {@link InferPack} made of requests already encoded with {@link encodeRequest} (no re-encoding). */
export function packEncoded(reqs: Uint8Array[]): Uint8Array {
  const n = reqs.length
  if (n < 1 || n > MAX_PACK_REQUESTS) {
    throw new RangeError(`a pack holds 1 to ${MAX_PACK_REQUESTS} requests, got ${n}`)
  }
  // {"v": 2, "reqs": [ ... ]}: fixmap(2), fixstr "v", 2, fixstr "reqs", array header.
  const head = [0x82, 0xa1, 0x76, 0x02, 0xa4, 0x72, 0x65, 0x71, 0x73, ...(n < 16 ? [0x90 | n] : [0xdc, n >> 8, n & 0xff])]
  let size = head.length
  for (const r of reqs) {
    size += r.byteLength
  }
  const out = new Uint8Array(size)
  out.set(head, 0)
  let at = head.length
  for (const r of reqs) {
    out.set(r, at)
    at += r.byteLength
  }
  return out
}

/**
 * What arrived on an infer subject: a version-1 request or a version-2 pack. Both decoded and
 * validated; a malformed message throws BAD_REQUEST (a malformed request inside a pack is returned
 * as its error, with its id when readable, so the others still run).
 */
export function decodeInferMessage(buf: Uint8Array): InferMessage {
  return inferMessageFrom(decodeValue(buf))
}

/** What {@link decodeInferMessage} returns. */
export type InferMessage = { v: 1; req: InferRequest } | { v: 2; reqs: (InferRequest | { id: string; error: CohortError })[] }

/**
 * {@link decodeInferMessage} of a value already decoded, or carried without encoding by an
 * in-process bus (`Transport.publishValue`): the same checks, fresh envelopes (tensor bytes are
 * not copied: they view what `o` holds).
 */
export function inferMessageFrom(o: unknown): InferMessage {
  if (!isObj(o)) {
    throw bad('request must be a msgpack map')
  }
  if (o.v !== 2) {
    if (o.v !== ENVELOPE_VERSION) {
      throw bad(`request.v must be ${ENVELOPE_VERSION}, got ${safeString(o.v).slice(0, 20)}`)
    }
    if (typeof o.id !== 'string') {
      throw bad('request.id must be a string')
    }
    return { v: 1, req: requestFrom(o, 'request') }
  }
  if (!Array.isArray(o.reqs) || o.reqs.length === 0 || o.reqs.length > MAX_PACK_REQUESTS) {
    throw bad(`pack.reqs must be an array of 1 to ${MAX_PACK_REQUESTS} requests`)
  }
  const reqs = o.reqs.map((r: unknown, i: number) => {
    const what = `pack.reqs[${i}]`
    const id = isObj(r) && typeof r.id === 'string' ? r.id : ''
    try {
      if (!isObj(r) || r.v !== ENVELOPE_VERSION || typeof r.id !== 'string') {
        throw bad(`${what} must be a request map with v: ${ENVELOPE_VERSION} and a string id`)
      }
      const req = requestFrom(r, what)
      delete req.ack
      return req
    } catch (e) {
      return { id, error: e instanceof CohortError ? e : bad(String(e)) }
    }
  })
  return { v: 2, reqs }
}

/** Encode a worker's notice to a gateway (protocol v2). */
export function encodeNotice(n: GatewayNotice): Uint8Array {
  wireCounts.encodes++
  return packr.pack(n)
}

/** Decode and validate a worker's notice to a gateway (protocol v2); replies are validated as {@link decodeReply}. */
export function decodeNotice(buf: Uint8Array): GatewayNotice {
  return noticeFrom(decodeValue(buf))
}

/** {@link decodeNotice} of a value already decoded or carried without encoding (see {@link inferMessageFrom}). */
export function noticeFrom(o: unknown): GatewayNotice {
  if (!isObj(o) || o.v !== 2) {
    throw bad('notice must be a msgpack map with v: 2')
  }
  if (o.t === 'accept') {
    if (typeof o.worker !== 'string' || !isStringArray(o.ids)) {
      throw bad('notice accept needs worker (string) and ids (array of strings)')
    }
    const n: GatewayNotice = { v: 2, t: 'accept', worker: o.worker, ids: o.ids }
    if (isNum(o.queued)) n.queued = o.queued
    if (isNum(o.waitMs)) n.waitMs = o.waitMs
    if (isNum(o.serviceMs)) n.serviceMs = o.serviceMs
    if (isNum(o.itemMs)) n.itemMs = o.itemMs
    if (isNum(o.aloneMs)) n.aloneMs = o.aloneMs
    const t = tenantWaits(o.tenants)
    if (t) n.tenants = t
    return n
  }
  if (o.t === 'replies' && Array.isArray(o.replies)) {
    return { v: 2, t: 'replies', replies: o.replies.map((r: unknown) => replyFrom(r)) }
  }
  if (o.t === 'tokens') {
    return { v: 2, t: 'tokens', steps: tokenStepsFrom(o.steps, 'notice.steps') }
  }
  throw bad('notice.t must be accept, replies or tokens')
}

/**
 * An upper bound of the msgpack size of `v` (bytes), without encoding it: what a bus that carries
 * values (in-process) checks against its message bound. Strings count 3 bytes per UTF-16 unit, every
 * header at its widest; binary counts its bytes.
 */
export function msgpackSizeBound(v: unknown): number {
  if (v === null || v === undefined || typeof v === 'boolean') {
    return 1
  }
  if (typeof v === 'number' || typeof v === 'bigint') {
    return 9
  }
  if (typeof v === 'string') {
    return 5 + 3 * v.length
  }
  if (ArrayBuffer.isView(v)) {
    return 10 + v.byteLength // bin or typed-array ext header, and its type byte
  }
  if (v instanceof Date) {
    return 15
  }
  let n = 5
  if (Array.isArray(v)) {
    for (const x of v) {
      n += msgpackSizeBound(x)
    }
    return n
  }
  if (typeof v === 'object') {
    for (const k in v) {
      n += 5 + 3 * k.length + msgpackSizeBound((v as Obj)[k])
    }
    return n
  }
  return 9
}
