/**
 * Configuration layers: where each live batching value comes from. One documented order, lowest
 * first: the engine's `default`, the `model`'s own (the runner: an ONNX model's limit, a
 * predictor's declared batch size, a fixed batch dimension), the `file` (a model repository's
 * config, reserved), the `flags` of the command line (global, then per-model), and the `runtime`
 * override (admin API, NATS KV). A higher layer wins field by field; removing a field from a layer
 * restores the value of the next lower layer that has it.
 * @module
 */
import { BATCHING_KEYS, DEFAULT_BATCHING, resolveBatchingConfig, type BatchingConfig, type BatchingKey, type ResolvedBatchingConfig } from './config.ts'

/** The layers, lowest first. */
export const CONFIG_SOURCES = ['default', 'model', 'file', 'flags', 'runtime'] as const

/** A layer's name. */
export type ConfigSource = (typeof CONFIG_SOURCES)[number]

/** One layer: its name and the fields it sets (absent or `undefined`: not set here). */
export interface ConfigLayer {
  source: ConfigSource
  values: Partial<BatchingConfig>
}

/** A resolved configuration and, per field, the layer its value came from. */
export interface LayeredBatching {
  config: Readonly<ResolvedBatchingConfig>
  sources: Readonly<Record<BatchingKey, ConfigSource>>
}

/**
 * Merge `layers` (in any order; applied lowest source first, then in the given order within a
 * source) over {@link DEFAULT_BATCHING} and validate the result.
 * @throws RangeError as `resolveBatchingConfig`, naming the first invalid field.
 */
export function layerBatching(layers: readonly ConfigLayer[]): LayeredBatching {
  const rank = (s: ConfigSource) => CONFIG_SOURCES.indexOf(s)
  const sorted = layers.map((l, i) => ({ l, i })).sort((a, b) => rank(a.l.source) - rank(b.l.source) || a.i - b.i)
  const merged: Partial<BatchingConfig> = {}
  const sources = Object.fromEntries(BATCHING_KEYS.map((k) => [k, 'default'])) as Record<BatchingKey, ConfigSource>
  for (const { l } of sorted) {
    for (const k of BATCHING_KEYS) {
      const v = l.values[k]
      if (v !== undefined) {
        ;(merged as Record<string, unknown>)[k] = v
        sources[k] = l.source
      }
    }
  }
  return { config: resolveBatchingConfig(merged, DEFAULT_BATCHING), sources: Object.freeze(sources) }
}
