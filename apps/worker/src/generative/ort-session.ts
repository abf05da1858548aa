/**
 * The onnxruntime-node side of `@cohort/generative`'s {@link DecoderSession}: feeds and fetches
 * become `ort.Tensor`s, and a fetch that is the same object as a feed becomes the same
 * `ort.Tensor`, so ORT writes the shared past/present KV buffer in place.
 * @module
 */
import type { DecoderSession, TensorLike } from '@cohort/generative'
import * as ort from 'onnxruntime-node'

/** Wraps an `ort.InferenceSession` as a {@link DecoderSession}; only the outputs asked for are read back. */
export function ortDecoderSession(session: ort.InferenceSession): DecoderSession {
  return {
    async run(feeds, fetches) {
      const made = new Map<TensorLike, ort.Tensor>()
      const tensor = (t: TensorLike): ort.Tensor => {
        let x = made.get(t)
        if (!x) {
          x = new ort.Tensor(t.type, t.data, [...t.dims])
          made.set(t, x)
        }
        return x
      }
      const f: Record<string, ort.Tensor> = {}
      for (const [k, t] of Object.entries(feeds)) f[k] = tensor(t)
      const o: Record<string, ort.Tensor | null> = {}
      for (const [k, t] of Object.entries(fetches)) o[k] = t === null ? null : tensor(t)
      const out = await session.run(f, o)
      const res: Record<string, TensorLike> = {}
      for (const [k, t] of Object.entries(out)) {
        if (fetches[k] === null) res[k] = { type: t.type as TensorLike['type'], data: t.data as TensorLike['data'], dims: t.dims }
      }
      return res
    },
  }
}
