/**
 * Validation of the generation fields of the envelopes (`InferRequest.generate`,
 * `InferReply.generated`, the `tokens` notice): the one check of a generation's settings, used by
 * the wire decoders and by the gateway's HTTP codecs (which name the fields as their API does).
 * Anything malformed throws `CohortError('BAD_REQUEST')` naming the field.
 * @module
 */
import { CohortError } from './errors.ts'
import type { FinishReason, GenerateInput, GenerateResult, SamplingParams, TokenChoice, TokenLogprob, TokenStep } from './generate.ts'

/** Longest text prompt, characters (1 MiB of text at most). */
export const MAX_PROMPT_CHARS = 1 << 20
/** Longest token-id prompt. */
export const MAX_PROMPT_TOKENS = 1 << 18
/** Most tokens one generation may ask for (`maxTokens`); the model's `maxContext` is usually smaller. */
export const MAX_GENERATE_TOKENS = 1 << 16
/** Most stop strings, and the longest of them (characters). */
export const MAX_STOP_STRINGS = 16
export const MAX_STOP_CHARS = 256
/** Most stop token ids. */
export const MAX_STOP_TOKEN_IDS = 64
/** Most alternatives per token of `logprobs`. */
export const MAX_LOGPROBS = 5

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array)
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v)
const isTokenId = (v: unknown): v is number => isInt(v) && v >= 0 && v < 2 ** 31
const bad = (message: string): CohortError => new CohortError('BAD_REQUEST', message)

/** Names of the fields in messages: the API's own (`max_tokens`), else `<what>.params.<key>`. */
export type GenerateFieldNames = Partial<Record<keyof SamplingParams | 'prompt' | 'stream', string>>

/**
 * Validate a generation request (`InferRequest.generate` or what an HTTP codec built); returns a
 * fresh {@link GenerateInput} with only the known fields. `names` renames fields in messages.
 */
export function generateFrom(v: unknown, what = 'generate', names: GenerateFieldNames = {}): GenerateInput {
  if (!isObj(v)) {
    throw bad(`${what} must be a map {prompt, params, stream}`)
  }
  const n = (k: keyof GenerateFieldNames) => names[k] ?? (k === 'prompt' || k === 'stream' ? `${what}.${k}` : `${what}.params.${k}`)
  const prompt = v.prompt
  if (typeof prompt === 'string') {
    if (prompt.length > MAX_PROMPT_CHARS) {
      throw bad(`${n('prompt')} has ${prompt.length} characters; at most ${MAX_PROMPT_CHARS}`)
    }
  } else if (Array.isArray(prompt)) {
    if (prompt.length === 0 || prompt.length > MAX_PROMPT_TOKENS || !prompt.every(isTokenId)) {
      throw bad(`${n('prompt')} as token ids must be 1 to ${MAX_PROMPT_TOKENS} integers in [0, 2^31)`)
    }
  } else {
    throw bad(`${n('prompt')} must be a string or an array of token ids`)
  }
  if (v.stream !== undefined && typeof v.stream !== 'boolean') {
    throw bad(`${n('stream')} must be a boolean`)
  }
  const p = v.params
  if (!isObj(p)) {
    throw bad(`${what}.params must be a map with maxTokens`)
  }
  const params: SamplingParams = { maxTokens: 0 }
  if (!isInt(p.maxTokens) || p.maxTokens < 1 || p.maxTokens > MAX_GENERATE_TOKENS) {
    throw bad(`${n('maxTokens')} must be an integer from 1 to ${MAX_GENERATE_TOKENS}, got ${short(p.maxTokens)}`)
  }
  params.maxTokens = p.maxTokens
  const num = (k: 'temperature' | 'topP', lo: number, hi: number, loOpen = false) => {
    const x = p[k]
    if (x === undefined || x === null) return
    if (typeof x !== 'number' || !Number.isFinite(x) || (loOpen ? x <= lo : x < lo) || x > hi) {
      throw bad(`${n(k)} must be a number in ${loOpen ? '(' : '['}${lo}, ${hi}], got ${short(x)}`)
    }
    params[k] = x
  }
  num('temperature', 0, 2)
  num('topP', 0, 1, true)
  const int = (k: 'topK' | 'seed' | 'logprobs', lo: number, hi: number) => {
    const x = p[k]
    if (x === undefined || x === null) return
    if (!isInt(x) || x < lo || x > hi) {
      throw bad(`${n(k)} must be an integer from ${lo} to ${hi}, got ${short(x)}`)
    }
    params[k] = x
  }
  int('topK', 0, 1 << 20)
  int('seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
  int('logprobs', 0, MAX_LOGPROBS)
  if (p.stop !== undefined && p.stop !== null) {
    const s = p.stop
    if (!Array.isArray(s) || s.length > MAX_STOP_STRINGS || !s.every((x) => typeof x === 'string' && x.length >= 1 && x.length <= MAX_STOP_CHARS)) {
      throw bad(`${n('stop')} must be at most ${MAX_STOP_STRINGS} non-empty strings of at most ${MAX_STOP_CHARS} characters`)
    }
    params.stop = [...(s as string[])]
  }
  if (p.stopTokenIds !== undefined && p.stopTokenIds !== null) {
    const s = p.stopTokenIds
    if (!Array.isArray(s) || s.length > MAX_STOP_TOKEN_IDS || !s.every(isTokenId)) {
      throw bad(`${n('stopTokenIds')} must be at most ${MAX_STOP_TOKEN_IDS} token ids (integers in [0, 2^31))`)
    }
    params.stopTokenIds = [...s]
  }
  if (p.ignoreEos !== undefined && p.ignoreEos !== null) {
    if (typeof p.ignoreEos !== 'boolean') {
      throw bad(`${n('ignoreEos')} must be a boolean`)
    }
    params.ignoreEos = p.ignoreEos
  }
  const ftd = v.firstTokenDeadline
  if (ftd !== undefined && (typeof ftd !== 'number' || !Number.isFinite(ftd))) {
    throw bad(`${what}.firstTokenDeadline must be a time in ms`)
  }
  const out: GenerateInput = { prompt: Array.isArray(prompt) ? [...prompt] : prompt, params, stream: v.stream === true }
  if (ftd !== undefined) {
    out.firstTokenDeadline = ftd
  }
  return out
}

const FINISH: readonly FinishReason[] = ['stop', 'length', 'cancelled', 'deadline']

function logprobsFrom(v: unknown, what: string): TokenLogprob[] {
  const one = (x: unknown): TokenChoice => {
    if (!isObj(x) || !isTokenId(x.token) || typeof x.logprob !== 'number') {
      throw bad(`${what} must be an array of {token, logprob, text?, bytes?, top?}`)
    }
    const c: TokenChoice = { token: x.token, logprob: x.logprob }
    if (x.text !== undefined && x.text !== null) {
      if (typeof x.text !== 'string') throw bad(`${what}[].text must be a string`)
      c.text = x.text
    }
    if (x.bytes !== undefined && x.bytes !== null) {
      if (!Array.isArray(x.bytes) || !x.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256)) throw bad(`${what}[].bytes must be an array of bytes`)
      c.bytes = [...(x.bytes as number[])]
    }
    return c
  }
  if (!Array.isArray(v)) {
    throw bad(`${what} must be an array of {token, logprob, top?}`)
  }
  return v.map((x) => {
    const lp: TokenLogprob = one(x)
    const top = (x as Obj).top
    if (top !== undefined && top !== null) {
      if (!Array.isArray(top)) throw bad(`${what}[].top must be an array`)
      lp.top = top.map(one)
    }
    return lp
  })
}

const tokensOf = (v: unknown, what: string): number[] => {
  if (!Array.isArray(v) || !v.every(isTokenId)) {
    throw bad(`${what} must be an array of token ids`)
  }
  return v
}

/** Validate `InferReply.generated`. */
export function generatedFrom(v: unknown, what = 'reply.generated'): GenerateResult {
  if (!isObj(v) || typeof v.text !== 'string') {
    throw bad(`${what} must be a map with text (a string)`)
  }
  if (!FINISH.includes(v.finishReason as FinishReason)) {
    throw bad(`${what}.finishReason must be one of ${FINISH.join(', ')}`)
  }
  const u = v.usage
  if (!isObj(u) || !isInt(u.promptTokens) || !isInt(u.completionTokens) || u.promptTokens < 0 || u.completionTokens < 0) {
    throw bad(`${what}.usage must be {promptTokens, completionTokens} (integers >= 0)`)
  }
  const r: GenerateResult = {
    text: v.text,
    tokens: tokensOf(v.tokens, `${what}.tokens`),
    finishReason: v.finishReason as FinishReason,
    usage: { promptTokens: u.promptTokens, completionTokens: u.completionTokens },
  }
  if (v.logprobs !== undefined && v.logprobs !== null) r.logprobs = logprobsFrom(v.logprobs, `${what}.logprobs`)
  return r
}

/** Validate the `steps` of a `tokens` notice. */
export function tokenStepsFrom(v: unknown, what = 'notice.steps'): TokenStep[] {
  if (!Array.isArray(v)) {
    throw bad(`${what} must be an array of {id, tokens, text}`)
  }
  return v.map((s, i) => {
    if (!isObj(s) || typeof s.id !== 'string' || typeof s.text !== 'string') {
      throw bad(`${what}[${i}] must be a map {id, tokens, text}`)
    }
    const step: TokenStep = { id: s.id, tokens: tokensOf(s.tokens, `${what}[${i}].tokens`), text: s.text }
    if (s.logprobs !== undefined && s.logprobs !== null) step.logprobs = logprobsFrom(s.logprobs, `${what}[${i}].logprobs`)
    return step
  })
}

function short(v: unknown): string {
  try {
    // JSON.stringify answers undefined for undefined, functions and symbols (its declared type says string).
    const json = JSON.stringify(v) as string | undefined
    return (json ?? String(v)).slice(0, 40)
  } catch {
    return typeof v
  }
}
