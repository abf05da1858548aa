/**
 * The KV slab: per layer one K and one V buffer `[rows, kvHeads, capacity, headDim]` holding every
 * resident sequence, row `r` valid on `[0, len_r)` (docs/generative.md#kv-layout). A batch is rows
 * `[0, n)`, so the engine keeps the rows it runs together at the front and moves a row (one copy
 * of that row per buffer) when a sequence leaves or finishes its prefill; nothing else is copied
 * per step. The capacity grows (and shrinks) in buckets with the longest resident sequence, since
 * the session's cost per step grows with it.
 * @module
 */
import type { TensorLike } from './session.ts'

/** Capacity step of the slab, tokens. */
export const SLAB_BUCKET = 64

export class KvSlab {
  readonly rows: number
  readonly #per: number
  readonly #maxCap: number
  #cap = 0
  #bufs: Float32Array[] = []
  /** {@link views} by `first * (rows + 1) + count`, until the next resize. */
  #views = new Map<number, TensorLike[]>()
  /** Row moves so far (metrics). */
  moves = 0
  /** Capacity changes so far (metrics). */
  resizes = 0

  /** `buffers` = 2 x layers; `per` = kvHeads x headDim. */
  constructor(
    rows: number,
    readonly buffers: number,
    readonly kvHeads: number,
    readonly headDim: number,
    maxContext: number,
  ) {
    this.rows = rows
    this.#per = kvHeads * headDim
    this.#maxCap = Math.ceil(maxContext / SLAB_BUCKET) * SLAB_BUCKET
  }

  get capacity(): number {
    return this.#cap
  }

  get bytes(): number {
    return this.#bufs.reduce((a, b) => a + b.byteLength, 0)
  }

  /**
   * Makes room for `need` tokens in the row about to run and every resident row's valid length
   * (`lens`, rows `[0, lens.length)`), rounded up to the bucket; shrinks when that is under half.
   */
  fit(need: number, lens: readonly number[]): void {
    for (const l of lens) need = Math.max(need, l)
    if (this.fits(need)) return
    const want = this.#want(need)
    const old = this.#bufs
    const oldCap = this.#cap
    this.#cap = want
    this.#views.clear()
    this.#bufs = Array.from({ length: this.buffers }, () => new Float32Array(this.rows * this.kvHeads * want * this.headDim))
    if (oldCap > 0) {
      const hd = this.headDim
      for (let b = 0; b < this.buffers; b++) {
        const src = old[b] as Float32Array
        const dst = this.#bufs[b] as Float32Array
        lens.forEach((len, r) => {
          const n = Math.min(len, want) * hd
          for (let h = 0; h < this.kvHeads; h++) {
            const s = (r * this.kvHeads + h) * oldCap * hd
            dst.set(src.subarray(s, s + n), (r * this.kvHeads + h) * want * hd)
          }
        })
      }
    }
    this.resizes++
  }

  /** True when {@link fit} for `need` tokens (the longest of the row about to run and every resident row) changes nothing. */
  fits(need: number): boolean {
    const want = this.#want(need)
    return want === this.#cap || (want < this.#cap && want * 2 > this.#cap)
  }

  #want(need: number): number {
    return Math.min(this.#maxCap, Math.max(SLAB_BUCKET, Math.ceil(need / SLAB_BUCKET) * SLAB_BUCKET))
  }

  /** Copies row `from` to row `to` (the first `len` tokens). */
  move(from: number, to: number, len: number): void {
    if (from === to) return
    const n = Math.min(len, this.#cap) * this.headDim
    const stride = this.#cap * this.headDim
    for (const buf of this.#bufs) {
      for (let h = 0; h < this.kvHeads; h++) {
        const s = (from * this.kvHeads + h) * stride
        buf.copyWithin((to * this.kvHeads + h) * stride, s, s + n)
      }
    }
    this.moves++
  }

  /** Swaps rows `a` and `b`. */
  swap(a: number, b: number): void {
    if (a === b) return
    const stride = this.#cap * this.headDim
    const tmp = new Float32Array(this.kvHeads * stride)
    for (const buf of this.#bufs) {
      tmp.set(buf.subarray(a * this.kvHeads * stride, (a + 1) * this.kvHeads * stride))
      buf.copyWithin(a * this.kvHeads * stride, b * this.kvHeads * stride, (b + 1) * this.kvHeads * stride)
      buf.set(tmp, b * this.kvHeads * stride)
    }
    this.moves += 2
  }

  /**
   * Tensors over rows `[first, first + count)` of every buffer (views, no copy), in buffer order.
   * The same objects are returned until the capacity changes, so a session may cache what it makes of them.
   */
  views(first: number, count: number): readonly TensorLike[] {
    const key = first * (this.rows + 1) + count
    let v = this.#views.get(key)
    if (!v) {
      const size = this.kvHeads * this.#cap * this.headDim
      const dims = [count, this.kvHeads, this.#cap, this.headDim]
      v = this.#bufs.map((b) => ({ type: 'float32' as const, data: b.subarray(first * size, (first + count) * size), dims }))
      this.#views.set(key, v)
    }
    return v
  }
}
