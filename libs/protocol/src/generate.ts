/**
 * The generation contract (generative models, docs/generative.md): what a generate request carries,
 * what travels back while it runs, and the interface a generation engine offers the worker's model
 * server. Types only; the engine lives in `@cohort/generative`, the wire codec in `codec.ts`.
 */
import type { WireError } from './wire-error.ts'

/** Sampling settings of one generation. Defaults are the engine's (documented in docs/generative.md). */
export interface SamplingParams {
  /** Most tokens to generate (OpenAI's default is 16). */
  maxTokens: number
  /** 0 = greedy. Default 1. */
  temperature?: number
  /** Keep the k most likely tokens; 0 = off. */
  topK?: number
  /** Nucleus sampling; 1 = off. */
  topP?: number
  /** Seed of the sampler: the same seed, prompt and params give the same tokens. */
  seed?: number
  /** Stop strings (also matched across token boundaries); the match is not part of the output. */
  stop?: string[]
  /** Token ids that end the generation (besides the model's end-of-sequence id). */
  stopTokenIds?: number[]
  /** Keep generating past the end-of-sequence token (benchmarks). */
  ignoreEos?: boolean
  /** Return the log-probability of each generated token and this many alternatives (0-5). */
  logprobs?: number
}

/** What a generate request asks for; rides in `InferRequest.generate`. */
export interface GenerateInput {
  /** The prompt: text (the worker tokenizes it) or token ids. */
  prompt: string | number[]
  params: SamplingParams
  /** Send token deltas ({@link TokenStep}) while generating, before the final reply. */
  stream: boolean
  /**
   * When the first token must have come (epoch ms; the gateway sets it from the model's TTFT SLO
   * or the client's `x-cohort-ttft-timeout-ms`). A generation still waiting for a slot then is
   * refused, before any token, with 503 OVERLOADED (retrying can help); one whose prompt alone takes
   * longer to prefill than this budget, with 504 DEADLINE_EXCEEDED. Absent: only the deadline.
   * See docs/generative.md#deadlines-and-the-server-slo.
   */
  firstTokenDeadline?: number
}

/**
 * Why a generation ended: `deadline` = its whole-generation deadline passed after its first token
 * (the output so far is the result; before the first token it fails DEADLINE_EXCEEDED instead).
 */
export type FinishReason = 'stop' | 'length' | 'cancelled' | 'deadline'

/** A token and its log-probability; `text` and `bytes` when the generator knows them (the OpenAI routes show them). */
export interface TokenChoice {
  token: number
  logprob: number
  /** The token's text alone (an incomplete UTF-8 character decodes to U+FFFD). */
  text?: string
  /** The token's UTF-8 bytes. */
  bytes?: number[]
}

/** Log-probabilities of one generated token. */
export interface TokenLogprob extends TokenChoice {
  /** The most likely alternatives, best first (`SamplingParams.logprobs` of them). */
  top?: TokenChoice[]
}

/** New output of one generation since its last delta. */
export interface TokenDelta {
  tokens: number[]
  /** Decoded text of these tokens (text held back for a possible stop string is sent later). */
  text: string
  logprobs?: TokenLogprob[]
}

/** One request's delta in a step message. */
export interface TokenStep extends TokenDelta {
  /** Request id. */
  id: string
}

/** The end of a generation; rides in `InferReply.generated`. */
export interface GenerateResult {
  /** The whole output text (without a matched stop string). */
  text: string
  tokens: number[]
  finishReason: FinishReason
  usage: { promptTokens: number; completionTokens: number }
  logprobs?: TokenLogprob[]
}

/** Receives one generation's output, in order: any number of `delta`, then one `done` or `error`. */
export interface GenerationSink {
  delta(d: TokenDelta): void
  done(r: GenerateResult): void
  error(e: WireError): void
}

/** What a generative model tells the gateway about itself (model metadata, `/v1/models`). */
export interface GenerativeInfo {
  /** Longest prompt + output, tokens. */
  maxContext: number
  vocabSize: number
  /** The chat template's name (docs/generative.md#chat-template), when the model has one. */
  chatTemplate?: string
  /** The model's server SLO: the budgets of a generation whose client sets none. */
  slo?: GenerativeSlo
}

/**
 * The budgets a generative model gives a generation whose client sets none
 * (docs/generative.md#deadlines-and-the-server-slo), ms. The gateway turns them into the request's
 * `firstTokenDeadline` and `deadline`; its `requestTimeoutMs` caps both.
 */
export interface GenerativeSlo {
  /** Time to first token. */
  ttftMs?: number
  /** The whole generation. */
  generationMs?: number
}

/** One ended generation, as a generator reports it for metrics ({@link Generator.watch}). */
export interface GenerationTiming {
  /** Why it ended; `error` for one ended by `GenerationSink.error`. */
  reason: FinishReason | 'error'
  promptTokens: number
  /** Tokens sampled (`usage.completionTokens`). */
  completionTokens: number
  /** Submit to first token, ms; absent when no token came. */
  ttftMs: number | undefined
  /** Mean ms between its tokens after the first; absent below 2 tokens. */
  tpotMs: number | undefined
}

/** Hooks a generator calls for metrics (synchronously, before the sink's call; they must not throw). */
export interface GenerationWatcher {
  /** A generation sampled its first token `ttftMs` after submit. */
  firstToken?(ttftMs: number): void
  finished?(t: GenerationTiming): void
}

/** The scheduler's state now, for metrics ({@link Generator.gauges}). */
export interface GeneratorGauges {
  /** Sequences being run (prefilling or decoding). */
  running: number
  /** Sequences waiting for admission (new or preempted). */
  waiting: number
  /** KV-cache tokens held by the running sequences, and the budget they share. */
  kvTokens: number
  kvBudgetTokens: number
  /** Sequences preempted since start (only grows). */
  preemptions: number
}

/**
 * A generation engine, as the worker's model server sees it: `submit` starts a generation (sync;
 * throws a CohortError for a request that can never run, e.g. a prompt past `maxContext`); the
 * engine calls the sink from then on. `cancel` frees the sequence's slot at the next step.
 */
export interface Generator {
  readonly info: GenerativeInfo
  submit(input: GenerateInput, deadline: number, sink: GenerationSink): { cancel(): void }
  /** Idempotent: ends every running generation with `error` (WORKER_LOST-like, retryable) and frees the engine. */
  close(): Promise<void>
  /**
   * Optional: report first tokens and ends to `w` from now on (docs/metrics.md#generative-models).
   * Without it the worker times a generation from its sink calls (streamed ones only for TTFT/TPOT).
   */
  watch?(w: GenerationWatcher): void
  /** Optional: the scheduler's state now (running, waiting, KV cache, preemptions). */
  gauges?(): GeneratorGauges
}
