/**
 * OpenAI's `logprobs` shapes (docs/generative.md#openai-compatible-api) of the engine's
 * {@link TokenLogprob}s: `/v1/completions`' `{tokens, token_logprobs, top_logprobs, text_offset}`
 * and chat's `{content: [{token, logprob, bytes, top_logprobs}], refusal: null}`.
 * @module
 */
import type { TokenChoice, TokenLogprob } from '@cohort/protocol'

const utf8 = new TextEncoder()

/** A token as OpenAI shows it: its text, else `token_id:<id>` (a generator that sends no text, as vLLM's `return_tokens_as_token_ids`). */
const tokenText = (t: TokenChoice): string => t.text ?? `token_id:${t.token}`
const tokenBytes = (t: TokenChoice): number[] => t.bytes ?? Array.from(utf8.encode(tokenText(t)))

/** The completions `logprobs` of some output tokens whose text starts at character `offset` of the output; and the offset after them. */
export function completionLogprobs(lps: readonly TokenLogprob[], offset: number) {
  let at = offset
  const text_offset = lps.map((l) => {
    const here = at
    at += Array.from(tokenText(l)).length // code points
    return here
  })
  const value = {
    tokens: lps.map(tokenText),
    token_logprobs: lps.map((l) => l.logprob),
    // The alternatives asked for and the chosen token, by text; tokens of one text (parts of
    // characters, all U+FFFD) share an entry: the most likely one's.
    top_logprobs: lps.map((l) => {
      const m: Record<string, number> = {}
      for (const t of [...(l.top ?? []), l]) m[tokenText(t)] ??= t.logprob
      return m
    }),
    text_offset,
  }
  return { value, next: at }
}

/** The chat `logprobs` of some output tokens. */
export function chatLogprobs(lps: readonly TokenLogprob[]) {
  const one = (t: TokenChoice) => ({ token: tokenText(t), logprob: t.logprob, bytes: tokenBytes(t) })
  return { content: lps.map((l) => ({ ...one(l), top_logprobs: (l.top ?? []).map(one) })), refusal: null }
}
