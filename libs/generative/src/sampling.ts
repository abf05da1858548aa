/**
 * Choosing the next token from one row of logits: greedy (temperature 0), temperature, top-k,
 * top-p, with a per-generation seeded PRNG (one draw per sampled token, so the same seed, prompt
 * and params reproduce the same tokens), and optional log-probabilities.
 * @module
 */
import type { TokenLogprob } from '@cohort/protocol'
import type { Prng } from './prng.ts'

/** Resolved sampling settings (defaults filled in: docs/generative.md#sampling). */
export interface SamplerSettings {
  temperature: number
  topK: number
  topP: number
  /** Alternatives per token in logprobs; undefined = no logprobs. */
  logprobs: number | undefined
}

/** The chosen token and, when asked, its log-probability (of the unscaled distribution) and the top alternatives. */
export interface Sampled {
  token: number
  logprob?: TokenLogprob
}

/** Index (from `at`) of the largest of `data[at, at + n)`, the first one on ties. Greedy decoding. */
export function argmax(data: Float32Array, at = 0, n = data.length - at): number {
  let best = 0
  let bv = data[at] as number
  for (let i = 1; i < n; i++) {
    const x = data[at + i] as number
    if (x > bv) {
      bv = x
      best = i
    }
  }
  return best
}

/** log-sum-exp of a row, for log-probabilities. */
function logSumExp(row: Float32Array): number {
  let m = -Infinity
  for (let i = 0; i < row.length; i++) m = Math.max(m, row[i] as number)
  let s = 0
  for (let i = 0; i < row.length; i++) s += Math.exp((row[i] as number) - m)
  return m + Math.log(s)
}

/** The indices of the k largest values, largest first (ties: lower index first). */
export function topIndices(row: Float32Array, k: number): number[] {
  const n = Math.min(k, row.length)
  const out: number[] = []
  for (let i = 0; i < row.length; i++) {
    const x = row[i] as number
    if (out.length === n && x <= (row[out[n - 1] as number] as number)) continue
    let j = out.length < n ? out.length : n - 1
    out[j] = i
    while (j > 0 && (row[out[j - 1] as number] as number) < x) {
      out[j] = out[j - 1] as number
      out[j - 1] = i
      j--
    }
  }
  return out
}

/**
 * Samples one token from `row` (the logits of one position). Greedy when `temperature` is 0;
 * otherwise softmax(row / temperature) restricted to the top-k (0 = all) and then to the smallest
 * set whose probability reaches top-p (1 = all), one PRNG draw per call.
 */
export function sampleToken(row: Float32Array, s: SamplerSettings, rng: Prng): Sampled {
  let token: number
  if (s.temperature <= 0) {
    token = argmax(row)
  } else {
    const u = rng.next()
    const cand = s.topK > 0 && s.topK < row.length ? topIndices(row, s.topK) : undefined
    const ids = cand ?? Array.from({ length: row.length }, (_, i) => i)
    let m = -Infinity
    for (const i of ids) m = Math.max(m, row[i] as number)
    const p = ids.map((i) => Math.exp(((row[i] as number) - m) / s.temperature))
    let order = ids.map((_, j) => j)
    if (s.topP < 1) {
      order.sort((a, b) => (p[b] as number) - (p[a] as number) || (ids[a] as number) - (ids[b] as number))
      const total = p.reduce((a, b) => a + b, 0)
      let acc = 0
      let keep = 0
      while (keep < order.length) {
        acc += p[order[keep] as number] as number
        keep++
        if (acc >= s.topP * total) break
      }
      order = order.slice(0, keep)
    }
    let total = 0
    for (const j of order) total += p[j] as number
    let r = u * total
    token = ids[order[order.length - 1] as number] as number
    for (const j of order) {
      r -= p[j] as number
      if (r < 0) {
        token = ids[j] as number
        break
      }
    }
  }
  if (s.logprobs === undefined) return { token }
  const lse = logSumExp(row)
  const lp: TokenLogprob = { token, logprob: (row[token] as number) - lse }
  if (s.logprobs > 0) lp.top = topIndices(row, s.logprobs).map((t) => ({ token: t, logprob: (row[t] as number) - lse }))
  return { token, logprob: lp }
}
