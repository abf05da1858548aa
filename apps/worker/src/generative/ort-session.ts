/**
 * The onnxruntime-node side of `@cohort/generative`'s {@link DecoderSession}: feeds and fetches
 * become `ort.Tensor`s, and a fetch that is the same object as a feed becomes the same
 * `ort.Tensor`, so ORT writes the shared past/present KV buffer in place. (onnxruntime-node 1.30
 * still copies every output back into a new ArrayBuffer, the bound presents included; the
 * wrapper drops those copies unread.)
 * @module
 */
import type { DecoderSession, TensorLike } from '@cohort/generative'
import * as ort from 'onnxruntime-node'

/**
 * Wraps an `ort.InferenceSession` as a {@link DecoderSession}; only the outputs asked for are read
 * back. The `ort.Tensor` made of a {@link TensorLike} is kept while that object lives (the slab's KV
 * views are the same objects step after step), so a step builds tensors only for its small inputs.
 */
export function ortDecoderSession(session: ort.InferenceSession): DecoderSession {
  const made = new WeakMap<TensorLike, ort.Tensor>()
  const tensor = (t: TensorLike): ort.Tensor => {
    let x = made.get(t)
    if (!x) {
      x = new ort.Tensor(t.type, t.data, t.dims)
      made.set(t, x)
    }
    return x
  }
  return {
    async run(feeds, fetches) {
      const f: Record<string, ort.Tensor> = {}
      for (const k in feeds) f[k] = tensor(feeds[k] as TensorLike)
      const o: Record<string, ort.Tensor | null> = {}
      for (const k in fetches) {
        const t = fetches[k] as TensorLike | null
        o[k] = t === null ? null : tensor(t)
      }
      const out = await session.run(f, o)
      const res: Record<string, TensorLike> = {}
      for (const k in fetches) {
        const t = out[k]
        if (fetches[k] === null && t) res[k] = { type: t.type as TensorLike['type'], data: t.data as TensorLike['data'], dims: t.dims }
      }
      return res
    },
  }
}
