/**
 * One generation inside the engine, and the checks and defaults applied when it is submitted.
 * @module
 */
import { CohortError, type FinishReason, type GenerateInput, type GenerationSink, type TokenLogprob } from '@cohort/protocol'
import { seededPrng, type Prng } from './prng.ts'
import type { SamplerSettings } from './sampling.ts'
import { OutputText, type Tokenizer } from './text.ts'

/** Default temperature (the protocol's): 1. */
export const DEFAULT_TEMPERATURE = 1
/** Most alternatives per token in logprobs. */
export const MAX_LOGPROBS = 5

export type SeqState = 'waiting' | 'prefill' | 'decode' | 'done'

export interface Seq {
  readonly id: number
  /** Prompt, then every generated token (the stop token excluded). */
  readonly tokens: number[]
  readonly promptLen: number
  readonly maxTokens: number
  readonly stopIds: ReadonlySet<number>
  readonly eos: number | undefined
  readonly sampler: SamplerSettings
  readonly rng: Prng
  readonly text: OutputText
  readonly sink: GenerationSink
  readonly stream: boolean
  readonly deadline: number
  /** When the first token must have come (`GenerateInput.firstTokenDeadline`), if set. */
  readonly firstTokenDeadline: number | undefined
  readonly submittedAt: number
  /** `session.run` time of its prefill chunks so far, ms (to tell overload from a prompt too long for its TTFT budget). */
  prefillMs: number
  state: SeqState
  /** Tokens in the KV cache. */
  cached: number
  /** Slab row while resident. */
  row: number
  /** Sampled tokens (the stop token included). */
  sampled: number
  firstTokenAt: number | undefined
  lastTokenAt: number | undefined
  cancelled: boolean
  preemptions: number
  /** Set when a stop condition or the length limit is met. */
  finishReason: FinishReason | undefined
  readonly logprobs: TokenLogprob[] | undefined
  /** Output since the last delta. */
  newTokens: number[]
  newLogprobs: TokenLogprob[]
}

function bad(message: string): CohortError {
  return new CohortError('INVALID_INPUT', message)
}

function check(cond: boolean, message: string): void {
  if (!cond) throw bad(message)
}

/** Validates a request and builds its sequence; throws INVALID_INPUT (400) naming the limit for a request that can never run. */
export function makeSeq(
  id: number,
  input: GenerateInput,
  deadline: number,
  sink: GenerationSink,
  now: number,
  ctx: { tokenizer: Tokenizer; vocabSize: number; maxContext: number; eosId: number },
): Seq {
  // From the wire: the params may be any value until checked.
  const raw: unknown = input.params
  check(typeof raw === 'object' && raw !== null, 'params must be an object')
  const p = input.params
  check(Number.isInteger(p.maxTokens) && p.maxTokens >= 1, `maxTokens must be an integer >= 1, got ${String(p.maxTokens)}`)
  const prompt = typeof input.prompt === 'string' ? ctx.tokenizer.encode(input.prompt) : input.prompt
  check(Array.isArray(prompt), 'prompt must be a string or an array of token ids')
  check(prompt.length >= 1, 'the prompt is empty (it must hold at least one token)')
  for (const t of prompt) check(Number.isInteger(t) && t >= 0 && t < ctx.vocabSize, `token id ${String(t)} is outside the vocabulary [0, ${ctx.vocabSize})`)
  check(prompt.length + p.maxTokens <= ctx.maxContext, `prompt (${prompt.length} tokens) + maxTokens (${p.maxTokens}) exceeds the model's context of ${ctx.maxContext} tokens`)
  const temperature = p.temperature ?? DEFAULT_TEMPERATURE
  check(Number.isFinite(temperature) && temperature >= 0, `temperature must be >= 0, got ${String(temperature)}`)
  const topK = p.topK ?? 0
  check(Number.isInteger(topK) && topK >= 0, `topK must be an integer >= 0, got ${String(topK)}`)
  const topP = p.topP ?? 1
  check(Number.isFinite(topP) && topP > 0 && topP <= 1, `topP must be in (0, 1], got ${String(topP)}`)
  const lp = p.logprobs
  check(lp === undefined || (Number.isInteger(lp) && lp >= 0 && lp <= MAX_LOGPROBS), `logprobs must be an integer 0-${MAX_LOGPROBS}, got ${String(lp)}`)
  const stops = p.stop ?? []
  check(Array.isArray(stops) && stops.every((s) => typeof s === 'string'), 'stop must be an array of strings')
  const stopIds = p.stopTokenIds ?? []
  check(Array.isArray(stopIds) && stopIds.every((t) => Number.isInteger(t)), 'stopTokenIds must be an array of token ids')
  check(p.seed === undefined || Number.isFinite(p.seed), `seed must be a number, got ${String(p.seed)}`)
  check(Number.isFinite(deadline), 'the deadline must be a time in ms')
  const ftd = input.firstTokenDeadline
  check(ftd === undefined || Number.isFinite(ftd), 'firstTokenDeadline must be a time in ms')
  const seed = p.seed ?? Math.floor(Math.random() * 2 ** 32)
  return {
    id,
    tokens: [...prompt],
    promptLen: prompt.length,
    maxTokens: p.maxTokens,
    stopIds: new Set(stopIds),
    eos: p.ignoreEos === true ? undefined : ctx.eosId,
    sampler: { temperature, topK, topP, logprobs: lp },
    rng: seededPrng(seed),
    text: new OutputText(ctx.tokenizer, stops),
    sink,
    stream: input.stream,
    deadline,
    firstTokenDeadline: ftd,
    submittedAt: now,
    prefillMs: 0,
    state: 'waiting',
    cached: 0,
    row: -1,
    sampled: 0,
    firstTokenAt: undefined,
    lastTokenAt: undefined,
    cancelled: false,
    preemptions: 0,
    finishReason: undefined,
    logprobs: lp === undefined ? undefined : [],
    newTokens: [],
    newLogprobs: [],
  }
}

/** Generated tokens so far (the stop token excluded). */
export function generated(s: Seq): number {
  return s.tokens.length - s.promptLen
}

/** Checks a request as {@link makeSeq} does (throws INVALID_INPUT) and returns its prompt tokens: for a caller that validates before handing the request on (the worker's main thread). */
export function checkRequest(input: GenerateInput, deadline: number, ctx: { tokenizer: Tokenizer; vocabSize: number; maxContext: number; eosId: number }): number[] {
  const noop: GenerationSink = { delta: () => undefined, done: () => undefined, error: () => undefined }
  return makeSeq(0, input, deadline, noop, 0, ctx).tokens
}
