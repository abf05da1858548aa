/**
 * The text pipeline's TS stages: preprocess (tokenise, truncate, bucket, pad) and postprocess
 * (softmax, top-k), plus the fan-out glue that carries `top_k` beside the model's tensors.
 * Pure batch functions: one result per item, an `itemError` fails that item alone.
 * @module
 */
import { itemError, type ItemTensor } from '@cohort/pipeline'
import { MODEL_IO } from './classifier.ts'
import { topK, type LabelScore } from './postprocess.ts'
import { DEFAULT_MAX_TOKENS, encodeText } from './tokenize.ts'

/** One request item (schema in cohort.config.ts; defaults applied). */
export interface TextRequest {
  text: string
  top_k: number
}

/** A preprocessed item: the model's input tensors and the request's k. */
export interface Encoded {
  tensors: Record<string, ItemTensor>
  topK: number
}

/** The model's logits and the request's k. */
export interface Scored {
  logits: ItemTensor
  topK: number
}

/** One response item. */
export interface TextPrediction {
  labels: LabelScore[]
}

/** Tokenise each text to its length bucket; a text with no tokens fails alone (INVALID_INPUT). */
export function preprocessItems(items: TextRequest[], maxTokens = DEFAULT_MAX_TOKENS): (Encoded | Error)[] {
  return items.map((item) => {
    if (typeof item.text !== 'string') {
      return itemError('text must be a string', 'INVALID_INPUT')
    }
    try {
      const e = encodeText(item.text, { maxTokens })
      const shape = [e.inputIds.length]
      return {
        tensors: {
          [MODEL_IO.inputIds]: { datatype: 'INT64', shape, data: e.inputIds },
          [MODEL_IO.attentionMask]: { datatype: 'INT64', shape: [...shape], data: e.attentionMask },
        },
        topK: item.top_k,
      }
    } catch (err) {
      return itemError(`text: ${err instanceof Error ? err.message : String(err)}`, 'INVALID_INPUT')
    }
  })
}

/** Fan-out merge: the model's logits beside the request's k (or the model's error). */
export function mergeLogits(e: Encoded, results: (Record<string, ItemTensor> | Error)[]): Scored | Error {
  const r = results[0]
  if (r === undefined || r instanceof Error) {
    return r ?? itemError('the model gave no result')
  }
  const logits = r[MODEL_IO.logits]
  return logits ? { logits, topK: e.topK } : itemError(`the model gave no ${MODEL_IO.logits}`)
}

/** Softmax and top-k labels for each item. */
export function postprocessItems(items: Scored[]): (TextPrediction | Error)[] {
  return items.map((s) => {
    try {
      return { labels: topK(s.logits.data as Float32Array, s.topK) }
    } catch (err) {
      return itemError(err instanceof Error ? err.message : String(err), 'INVALID_INPUT')
    }
  })
}
