/**
 * A stage batch as one columnar value for the bus (remote placement): one column per field of
 * the items, a tensor field as ONE typed array for the whole batch (row offsets when the items'
 * shapes differ), so a batch of n items costs a few msgpack values, not n maps. Only standard
 * msgpack types (`bin`, maps, arrays, numbers, strings), like {@link toWireValue}.
 * @module
 */
import { isErrorCode, type Datatype } from '@cohort/protocol'
import { ItemError } from '@cohort/predictor'
import { toItemError } from './stage-queue.ts'
import { fromWireValue, toWireValue, TYPED, type TypedName } from './wire.ts'

const CTORS = TYPED
type CtorName = TypedName
type Typed = InstanceType<(typeof CTORS)[CtorName]>

/**
 * One field of every item of a batch:
 * - `t`: an item tensor `{datatype, shape, data}` of one shape: `b` holds n rows, row-major;
 * - `r`: item tensors of one datatype, ragged: item i's elements are `off[i] .. off[i+1]` of `b`
 *   and its shape `shapes[i]`;
 * - `a`: plain typed arrays (not in a tensor), elements `off[i] .. off[i+1]` of `b`;
 * - `o`: records with the same keys (not tensors), one column per key (nested);
 * - `j`: anything else, one wire value ({@link toWireValue}) per item.
 */
export type WireColumn =
  | { k: 't'; dt: Datatype; ta: CtorName; shape: number[]; b: Uint8Array }
  | { k: 'r'; dt: Datatype; ta: CtorName; shapes: number[][]; off: number[]; b: Uint8Array }
  | { k: 'a'; ta: CtorName; off: number[]; b: Uint8Array }
  | { k: 'o'; cols: Record<string, WireColumn> }
  | { k: 'j'; v: unknown[] }

/**
 * A batch of `n` values on the wire: `cols` when every value is a record with the same keys (in
 * the first value's key order), else `rows`, one wire value per item.
 */
export type WireBatch = { n: number; cols: Record<string, WireColumn> } | { n: number; rows: unknown[] }

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) && Object.getPrototypeOf(v) === Object.prototype
}

function ctorName(v: unknown): CtorName | undefined {
  if (!ArrayBuffer.isView(v) || v instanceof DataView) {
    return undefined
  }
  const n = v.constructor.name
  return n in CTORS ? (n as CtorName) : undefined
}

/** Typed arrays of one type into one byte buffer; `off` gets the element offsets. */
function concat(arrays: Typed[], off: number[] | undefined): Uint8Array {
  let bytes = 0
  for (const a of arrays) {
    bytes += a.byteLength
  }
  const out = new Uint8Array(bytes)
  let at = 0
  let el = 0
  off?.push(0)
  for (const a of arrays) {
    out.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), at)
    at += a.byteLength
    el += a.length
    off?.push(el)
  }
  return out
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) {
    return false
  }
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) {
      return false
    }
  }
  return true
}

function column(vals: unknown[], depth: number): WireColumn {
  const first = vals[0]
  const plain = ctorName(first)
  if (plain !== undefined && vals.every((v) => ctorName(v) === plain)) {
    const off: number[] = []
    return { k: 'a', ta: plain, off, b: concat(vals as Typed[], off) }
  }
  if (isRecord(first) && typeof first['datatype'] === 'string' && Array.isArray(first['shape'])) {
    const dt = first['datatype'] as Datatype
    const ta = ctorName(first['data'])
    const shape = first['shape'] as number[]
    let uniform = true
    let ok = ta !== undefined
    for (let i = 0; ok && i < vals.length; i++) {
      const v = vals[i]
      ok = isRecord(v) && Object.keys(v).length === 3 && v['datatype'] === dt && Array.isArray(v['shape']) && ctorName(v['data']) === ta
      if (ok && uniform && !sameShape((v as { shape: number[] }).shape, shape)) {
        uniform = false
      }
    }
    if (ok && ta !== undefined) {
      const data = vals.map((v) => (v as { data: Typed }).data)
      if (uniform) {
        const per = shape.reduce((a, b) => a * b, 1)
        if (data.every((d) => d.length === per)) {
          return { k: 't', dt, ta, shape: [...shape], b: concat(data, undefined) }
        }
      }
      const off: number[] = []
      return { k: 'r', dt, ta, shapes: vals.map((v) => [...(v as { shape: number[] }).shape]), off, b: concat(data, off) }
    }
  }
  const cols = recordColumns(vals, depth)
  return cols ? { k: 'o', cols } : { k: 'j', v: vals.map(toWireValue) }
}

/** Nesting of record columns kept columnar; deeper values go as per-item wire values. */
const MAX_DEPTH = 8

/** One column per key when every value is a plain record with the first one's keys, else undefined. */
function recordColumns(values: readonly unknown[], depth: number): Record<string, WireColumn> | undefined {
  const first = values[0]
  if (values.length === 0 || depth >= MAX_DEPTH || !isRecord(first)) {
    return undefined
  }
  const keys = Object.keys(first)
  const same = values.every((v) => {
    if (!isRecord(v)) {
      return false
    }
    const ks = Object.keys(v)
    // An undefined field goes as rows: msgpack leaves it out of a map (as fused, where it is
    // absent from JSON), but would write it as nil in a column.
    return ks.length === keys.length && keys.every((k) => k in v && v[k] !== undefined)
  })
  if (!same) {
    return undefined
  }
  const cols: Record<string, WireColumn> = {}
  for (const k of keys) {
    cols[k] = column(
      values.map((v) => (v as Record<string, unknown>)[k]),
      depth + 1,
    )
  }
  return cols
}

/** A batch of stage values (items, or results) as one {@link WireBatch}. */
export function encodeBatch(values: readonly unknown[]): WireBatch {
  const cols = recordColumns(values, 0)
  return cols ? { n: values.length, cols } : { n: values.length, rows: values.map(toWireValue) }
}

function bad(msg: string): never {
  throw new TypeError(`bad stage batch: ${msg}`)
}

function isCount(x: unknown): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x >= 0
}

/** `b` as an aligned typed array of `ta` (one copy for the whole column). */
function typed(ta: unknown, b: unknown): Typed {
  if (typeof ta !== 'string' || !(ta in CTORS)) {
    bad(`unknown typed array ${String(ta)}`)
  }
  if (!(b instanceof Uint8Array)) {
    bad('column bytes must be bin')
  }
  const Ctor = CTORS[ta as CtorName]
  if (b.byteLength % Ctor.BYTES_PER_ELEMENT !== 0) {
    bad(`${b.byteLength} bytes is not a whole number of ${ta} elements`)
  }
  const copy = new Uint8Array(b.byteLength)
  copy.set(b)
  return new Ctor(copy.buffer, 0, b.byteLength / Ctor.BYTES_PER_ELEMENT)
}

function offsets(off: unknown, n: number, total: number): number[] {
  if (!Array.isArray(off) || off.length !== n + 1 || off[0] !== 0 || off[n] !== total) {
    bad(`row offsets must be ${n + 1} numbers from 0 to ${total}`)
  }
  for (let i = 0; i < n; i++) {
    if (!isCount(off[i + 1]) || (off[i + 1] as number) < (off[i] as number)) {
      bad('row offsets must be increasing integers')
    }
  }
  return off as number[]
}

/** `off[i]` of offsets {@link offsets} checked (n + 1 of them). */
function offsetAt(off: readonly number[], i: number): number {
  const v = off[i]
  if (v === undefined) {
    bad(`row offset ${i} is missing`)
  }
  return v
}

function shapeOf(s: unknown): number[] {
  if (!Array.isArray(s) || s.length > 16 || !s.every(isCount)) {
    bad('a shape is an array of at most 16 non-negative integers')
  }
  return s
}

function decodeColumn(c: unknown, n: number): unknown[] {
  if (typeof c !== 'object' || c === null) {
    bad('a column must be a map')
  }
  const col = c as Record<string, unknown>
  const out = new Array<unknown>(n)
  switch (col['k']) {
    case 't': {
      const data = typed(col['ta'], col['b'])
      const shape = shapeOf(col['shape'])
      const per = shape.reduce((a, b) => a * b, 1)
      if (data.length !== per * n) {
        bad(`a ${n}-row column of shape [${shape.join(',')}] needs ${per * n} elements, got ${data.length}`)
      }
      for (let i = 0; i < n; i++) {
        out[i] = { datatype: col['dt'], shape: [...shape], data: data.subarray(i * per, (i + 1) * per) }
      }
      return out
    }
    case 'r': {
      const data = typed(col['ta'], col['b'])
      const off = offsets(col['off'], n, data.length)
      const shapes = col['shapes']
      if (!Array.isArray(shapes) || shapes.length !== n) {
        bad(`a ragged column needs ${n} shapes`)
      }
      for (let i = 0; i < n; i++) {
        const shape = shapeOf(shapes[i])
        const lo = offsetAt(off, i)
        const hi = offsetAt(off, i + 1)
        if (shape.reduce((a, b) => a * b, 1) !== hi - lo) {
          bad(`row ${i}: shape [${shape.join(',')}] does not match its ${hi - lo} elements`)
        }
        out[i] = { datatype: col['dt'], shape, data: data.subarray(lo, hi) }
      }
      return out
    }
    case 'a': {
      const data = typed(col['ta'], col['b'])
      const off = offsets(col['off'], n, data.length)
      for (let i = 0; i < n; i++) {
        out[i] = data.subarray(offsetAt(off, i), offsetAt(off, i + 1))
      }
      return out
    }
    case 'o':
      return decodeColumns(col['cols'], n)
    case 'j': {
      const v = col['v']
      if (!Array.isArray(v) || v.length !== n) {
        bad(`a value column needs ${n} values`)
      }
      for (let i = 0; i < n; i++) {
        out[i] = fromWireValue(v[i])
      }
      return out
    }
    default:
      return bad(`unknown column kind ${JSON.stringify(col['k'])}`)
  }
}

/**
 * Inverse of {@link encodeBatch}: the n values. A tensor column is copied once to aligned memory
 * and every item's `data` is a view of it (no per-item copy).
 * @throws TypeError when `w` is not a well-formed batch (sizes, offsets and shapes are checked).
 */
export function decodeBatch(w: unknown): unknown[] {
  if (typeof w !== 'object' || w === null) {
    bad('a batch must be a map')
  }
  const b = w as Record<string, unknown>
  const n = b['n']
  if (!isCount(n)) {
    bad('n must be a non-negative integer')
  }
  if (Array.isArray(b['rows'])) {
    if (b['rows'].length !== n) {
      bad(`${n} rows expected, got ${b['rows'].length}`)
    }
    return b['rows'].map(fromWireValue)
  }
  return decodeColumns(b['cols'], n)
}

/** n records from their columns. */
function decodeColumns(cols: unknown, n: number): Record<string, unknown>[] {
  if (typeof cols !== 'object' || cols === null || Array.isArray(cols)) {
    bad('a batch has cols or rows')
  }
  const out: Record<string, unknown>[] = Array.from({ length: n }, () => ({}))
  for (const [k, c] of Object.entries(cols)) {
    if (k === '__proto__') {
      bad('a field may not be named __proto__')
    }
    const vals = decodeColumn(c, n)
    out.forEach((rec, i) => {
      rec[k] = vals[i]
    })
  }
  return out
}

/**
 * One part of a stage request (remote placement): a batch of items and their end-to-end
 * deadlines, epoch ms (`d`: one for all, or one per item; 0 for none).
 */
export interface WireStagePart {
  d: number | number[]
  b: WireBatch
}

/** The answer to a {@link WireStagePart}: the results of the items that did not fail, in order, and the failures by index. */
export interface WireStageResult {
  b: WireBatch
  e?: { i: number; code: string; message: string }[]
}

/** A stage batch and its per-item deadlines (`Infinity` for none) as one request part. */
export function encodeStagePart(items: readonly unknown[], deadlines: readonly number[]): WireStagePart {
  const d0 = deadlines[0] ?? 0
  const same = deadlines.every((d) => d === d0)
  const wire = (d: number) => (Number.isFinite(d) ? d : 0)
  return { d: same ? wire(d0) : deadlines.map(wire), b: encodeBatch(items) }
}

/**
 * Inverse of {@link encodeStagePart}: the items and their deadlines (`Infinity` for none).
 * @throws TypeError for a malformed part.
 */
export function decodeStagePart(p: unknown): { items: unknown[]; deadlines: number[] } {
  if (typeof p !== 'object' || p === null || !('b' in p)) {
    bad('a stage part is {d, b}')
  }
  const items = decodeBatch(p.b)
  const d = (p as { d?: unknown }).d
  const ok = (x: unknown): x is number => typeof x === 'number' && x >= 0
  let deadlines: number[]
  if (ok(d)) {
    deadlines = new Array<number>(items.length).fill(d === 0 ? Infinity : d)
  } else if (Array.isArray(d) && d.length === items.length && d.every(ok)) {
    deadlines = d.map((x) => (x === 0 ? Infinity : x))
  } else {
    bad(`d must be a deadline or ${items.length} deadlines (epoch ms, 0 for none)`)
  }
  return { items, deadlines }
}

/** A stage's results (an Error fails its item) as one {@link WireStageResult}. */
export function encodeStageResults(results: readonly unknown[]): WireStageResult {
  let errors: WireStageResult['e']
  let ok: unknown[] = results as unknown[]
  if (results.some((r) => r instanceof Error)) {
    const errs: NonNullable<WireStageResult['e']> = []
    errors = errs
    ok = []
    results.forEach((r, i) => {
      if (r instanceof Error) {
        const e = toItemError(r)
        errs.push({ i, code: e.code, message: e.message })
      } else {
        ok.push(r)
      }
    })
  }
  return errors ? { b: encodeBatch(ok), e: errors } : { b: encodeBatch(ok) }
}

/**
 * Inverse of {@link encodeStageResults}: `n` results, an `ItemError` (with its code) for each
 * failed item.
 * @throws TypeError for a malformed result.
 */
export function decodeStageResults(r: unknown, n: number): unknown[] {
  if (typeof r !== 'object' || r === null || !('b' in r)) {
    bad('a stage result is {b, e?}')
  }
  const ok = decodeBatch(r.b)
  const e = (r as { e?: unknown }).e ?? []
  if (!Array.isArray(e) || ok.length + e.length !== n) {
    bad(`${n} results expected, got ${ok.length} and ${Array.isArray(e) ? e.length : 0} errors`)
  }
  const out = new Array<unknown>(n)
  for (const raw of e as unknown[]) {
    // From the wire: any value; a non-object names no item.
    const x: { i?: unknown; code?: unknown; message?: unknown } = typeof raw === 'object' && raw !== null ? raw : {}
    if (!isCount(x.i) || x.i >= n || out[x.i] !== undefined) {
      bad('an error names an item that is not there')
    }
    // A message that is not a string (a malformed peer) is dropped, not printed as [object Object].
    out[x.i] = new ItemError(typeof x.message === 'string' ? x.message : '', isErrorCode(x.code) ? x.code : 'PREDICTOR_FAILED')
  }
  let k = 0
  for (let i = 0; i < n; i++) {
    if (out[i] === undefined) {
      out[i] = ok[k++]
    }
  }
  return out
}
