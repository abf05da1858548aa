/**
 * OpenAI-compatible generation (docs/generative.md#openai-compatible-api): `POST /v1/completions`,
 * `POST /v1/chat/completions` (the model's chat template, `chat-template.ts`), both with
 * `stream: true` as data-only SSE ending `data: [DONE]` and `stream_options.include_usage`, and
 * `GET /v1/models` (the generative models). Errors are OpenAI's `{"error": {message, type, param,
 * code}}`. Everything goes through the one door (deadlines, auth, tenants, metrics).
 * @module
 */
import type { Context, Hono } from 'hono'
import { CohortError, generateFrom, type GenerateInput, type GenerateResult, type TokenLogprob } from '@cohort/protocol'
import { bodyOf, clientGone, closeIfBodyUnread, parseJson } from '../body.ts'
import { applyChatTemplate, chatMessages } from '../chat-template.ts'
import type { InferenceDoor, Passage } from '../door.ts'
import { collect, sseResponse, startGeneration, type GenEvent } from '../generation.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { httpArrival } from './arrival.ts'
import { chatLogprobs, completionLogprobs } from './openai-logprobs.ts'
import { DEFAULT_MAX_TOKENS } from './generate.ts'
import { checkModelPath } from './infer.ts'
import { headerOf } from '../request-header.ts'

type Body = Record<string, unknown>

/** The OpenAI error body of a CohortError (`param`: the field its message starts with, if any). */
function openaiError(c: Context, e: CohortError): Response {
  closeIfBodyUnread(c)
  if (e.retryAfterS !== undefined || e.status === 503) {
    c.header('Retry-After', String(Math.max(1, Math.ceil(e.retryAfterS ?? 1))))
  }
  return c.json(errorBody(e, c.req.path.endsWith('/chat/completions')), e.status as 400)
}

/** The generative engine's message for a request that can never fit the model (libs/generative/src/sequence.ts). */
const CONTEXT_OVERFLOW = /^prompt \((\d+) tokens\) \+ maxTokens \((\d+)\) exceeds the model's context of (\d+) tokens/

/** Request fields an error message may start with (OpenAI's `param`). */
const FIELDS = new Set([
  'model',
  'prompt',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'seed',
  'stop',
  'stop_token_ids',
  'ignore_eos',
  'stream',
  'stream_options',
  'n',
  'best_of',
  'echo',
  'suffix',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'tools',
  'tool_choice',
  'functions',
  'function_call',
  'response_format',
])

/**
 * The OpenAI error body of a CohortError. A prompt plus max_tokens over the model's context gets
 * OpenAI's own code, `context_length_exceeded`, and its wording in OpenAI's field names
 * (`messages` for chat, `prompt` for completions, `max_tokens`).
 */
export function errorBody(e: CohortError, chat = false) {
  const overflow = CONTEXT_OVERFLOW.exec(e.message)
  if (overflow) {
    const [, prompt, max, context] = overflow.map(Number) as [number, number, number, number]
    const where = chat ? 'messages' : 'prompt'
    return {
      error: {
        message: `This model's maximum context length is ${context} tokens. However, you requested ${prompt + max} tokens (${prompt} in the ${where}, ${max} in max_tokens). Please reduce the length of the ${where} or max_tokens.`,
        type: 'invalid_request_error',
        param: where,
        code: 'context_length_exceeded',
      },
    }
  }
  const first = /^([a-z_]+)(?:\[\d+\])?[ .]/.exec(e.message)?.[1]
  const param = first !== undefined && FIELDS.has(first) ? first : /^model "/.test(e.message) ? 'model' : null
  const type =
    e.status === 401
      ? 'authentication_error'
      : e.status === 404
        ? 'not_found_error'
        : e.status === 429
          ? 'rate_limit_error'
          : e.status < 500
            ? 'invalid_request_error'
            : 'server_error'
  return { error: { message: e.message, type, param, code: e.code } }
}

/** A field that must be absent or hold its neutral value: Cohort does not implement it. */
function unsupported(b: Body, key: string, neutral: (v: unknown) => boolean): void {
  const v = b[key]
  if (v !== undefined && v !== null && !neutral(v)) {
    throw new CohortError('BAD_REQUEST', `${key} is not supported by this server (docs/generative.md#openai-compatible-api)`)
  }
}

/** Logprobs asked for: the alternatives per token (the engine's `logprobs`) and the field that named them. */
type LogprobsAsk = { value: unknown; name: string } | undefined

function common(b: Body, prompt: string | number[], maxTokens: unknown, maxName: string, logprobs: LogprobsAsk): GenerateInput {
  unsupported(b, 'n', (v) => v === 1)
  unsupported(b, 'best_of', (v) => v === 1)
  unsupported(b, 'echo', (v) => v === false)
  unsupported(b, 'suffix', (v) => v === '')
  unsupported(b, 'frequency_penalty', (v) => v === 0)
  unsupported(b, 'presence_penalty', (v) => v === 0)
  unsupported(b, 'logit_bias', (v) => typeof v === 'object' && v !== null && Object.keys(v).length === 0)
  unsupported(b, 'tools', (v) => Array.isArray(v) && v.length === 0)
  unsupported(b, 'tool_choice', (v) => v === 'none')
  unsupported(b, 'functions', (v) => Array.isArray(v) && v.length === 0)
  unsupported(b, 'function_call', (v) => v === 'none')
  unsupported(b, 'response_format', (v) => (v as { type?: unknown } | null | undefined)?.type === 'text')
  if (b['stream'] !== undefined && b['stream'] !== null && typeof b['stream'] !== 'boolean') {
    throw new CohortError('BAD_REQUEST', 'stream must be a boolean')
  }
  const so = b['stream_options']
  if (
    so !== undefined &&
    so !== null &&
    (typeof so !== 'object' || Array.isArray(so) || ((so as Body)['include_usage'] !== undefined && typeof (so as Body)['include_usage'] !== 'boolean'))
  ) {
    throw new CohortError('BAD_REQUEST', 'stream_options must be {"include_usage": boolean}')
  }
  const stop = b['stop']
  const params: Body = {
    maxTokens: maxTokens ?? DEFAULT_MAX_TOKENS,
    ...(b['temperature'] !== undefined && b['temperature'] !== null ? { temperature: b['temperature'] } : {}),
    ...(b['top_p'] !== undefined && b['top_p'] !== null ? { topP: b['top_p'] } : {}),
    ...(b['top_k'] !== undefined && b['top_k'] !== null && b['top_k'] !== -1 ? { topK: b['top_k'] } : {}),
    ...(b['seed'] !== undefined && b['seed'] !== null ? { seed: b['seed'] } : {}),
    ...(stop !== undefined && stop !== null ? { stop: typeof stop === 'string' ? [stop] : stop } : {}),
    ...(b['stop_token_ids'] !== undefined && b['stop_token_ids'] !== null ? { stopTokenIds: b['stop_token_ids'] } : {}),
    ...(b['ignore_eos'] !== undefined && b['ignore_eos'] !== null ? { ignoreEos: b['ignore_eos'] } : {}),
    ...(logprobs ? { logprobs: logprobs.value } : {}),
  }
  return generateFrom({ prompt, params, stream: b['stream'] === true }, 'body', {
    prompt: 'prompt',
    maxTokens: maxName,
    temperature: 'temperature',
    topP: 'top_p',
    topK: 'top_k',
    seed: 'seed',
    stop: 'stop',
    stopTokenIds: 'stop_token_ids',
    ignoreEos: 'ignore_eos',
    logprobs: logprobs?.name ?? 'logprobs',
  })
}

function bodyObject(v: unknown): Body {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new CohortError('BAD_REQUEST', 'body must be a JSON object')
  }
  const b = v as Body
  if (typeof b['model'] !== 'string' || b['model'] === '') {
    throw new CohortError('BAD_REQUEST', 'model must be a non-empty string (a generative model: GET /v1/models)')
  }
  checkModelPath(b['model'], undefined)
  return b
}

/** `/v1/completions`: `prompt` as a string, token ids, or a one-element array of either. */
function completionInput(b: Body): GenerateInput {
  let prompt = b['prompt']
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) {
    prompt = prompt[0]
  }
  if (Array.isArray(prompt) && prompt.some((x) => typeof x !== 'number')) {
    throw new CohortError('BAD_REQUEST', 'prompt must be a string, an array of token ids, or one of those in a one-element array (one prompt per request)')
  }
  unsupported(b, 'top_logprobs', (v) => v === 0)
  // Completions' `logprobs` is the number of alternatives per token (0-5); absent, null or false: none.
  const lp = b['logprobs']
  return common(b, prompt as string | number[], b['max_tokens'], 'max_tokens', lp === undefined || lp === null || lp === false ? undefined : { value: lp, name: 'logprobs' })
}

/** Chat's `logprobs: true` with `top_logprobs` alternatives per token (default 0). */
function chatLogprobsAsk(b: Body): LogprobsAsk {
  const on = b['logprobs']
  if (on !== undefined && on !== null && typeof on !== 'boolean') {
    throw new CohortError('BAD_REQUEST', 'logprobs must be a boolean')
  }
  const top = b['top_logprobs']
  if (on !== true) {
    if (top !== undefined && top !== null && top !== 0) {
      throw new CohortError('BAD_REQUEST', 'top_logprobs needs logprobs: true')
    }
    return undefined
  }
  return { value: top ?? 0, name: 'top_logprobs' }
}

/** OpenAI's finish_reason: `length` when the output was cut (max_tokens, or the deadline: finish reason `deadline`), else `stop`. */
const finishReason = (r: GenerateResult) => (r.finishReason === 'length' || r.finishReason === 'deadline' ? 'length' : 'stop')
const usageOf = (r: GenerateResult) => ({
  prompt_tokens: r.usage.promptTokens,
  completion_tokens: r.usage.completionTokens,
  total_tokens: r.usage.promptTokens + r.usage.completionTokens,
})

/** What differs between the two endpoints' answers. */
interface Shape {
  object: string
  chunkObject: string
  idPrefix: string
  choice(r: GenerateResult): Body
  /** The choice of a streamed chunk: a delta's text, or the end (`text` undefined). */
  chunkChoice(text: string | undefined, first: boolean): Body
  /** The `logprobs` of some output tokens, the text before them having `offset` characters; and the offset after them. */
  logprobs(lps: readonly TokenLogprob[], offset: number): { value: unknown; next: number }
}

const COMPLETION: Shape = {
  object: 'text_completion',
  chunkObject: 'text_completion',
  idPrefix: 'cmpl-',
  choice: (r) => ({ index: 0, text: r.text, logprobs: r.logprobs ? completionLogprobs(r.logprobs, 0).value : null, finish_reason: finishReason(r) }),
  chunkChoice: (text) => ({ index: 0, text: text ?? '', logprobs: null, finish_reason: null }),
  logprobs: completionLogprobs,
}

const CHAT: Shape = {
  object: 'chat.completion',
  chunkObject: 'chat.completion.chunk',
  idPrefix: 'chatcmpl-',
  choice: (r) => ({ index: 0, message: { role: 'assistant', content: r.text }, logprobs: r.logprobs ? chatLogprobs(r.logprobs) : null, finish_reason: finishReason(r) }),
  chunkChoice: (text, first) => ({
    index: 0,
    delta: text === undefined ? {} : first ? { role: 'assistant', content: text } : { content: text },
    logprobs: null,
    finish_reason: null,
  }),
  logprobs: (lps, offset) => ({ value: chatLogprobs(lps), next: offset }),
}

async function serveGeneration(c: Context, p: Passage, b: Body, input: GenerateInput, shape: Shape, o: ResolvedGatewayOptions): Promise<Response> {
  const model = b['model'] as string
  const g = startGeneration(p, input, { signal: clientGone(c, o), retryable: headerOf(c, 'idempotency-key') !== undefined })
  const id = `${shape.idPrefix}${p.requestId}`
  const created = Math.floor(Date.now() / 1000)
  const head = { id, object: shape.object, created, model, system_fingerprint: null }
  if (!input.stream) {
    const r = await collect(g)
    return c.json({ ...head, choices: [shape.choice(r)], usage: usageOf(r) })
  }
  const first = await g.next()
  if (first.t === 'error') {
    throw first.e // answered with its status: nothing was streamed yet
  }
  const includeUsage = (b['stream_options'] as Body | null | undefined)?.['include_usage'] === true
  const chunk = { id, object: shape.chunkObject, created, model, system_fingerprint: null }
  const usageNull = includeUsage ? { usage: null } : {}
  let firstChunk = true
  let offset = 0
  const frames = (e: GenEvent): string[] => {
    if (e.t === 'error') {
      return [JSON.stringify(errorBody(e.e))]
    }
    const out: string[] = []
    if (e.t === 'delta') {
      const lps = e.d.logprobs ?? []
      if (e.d.text !== '' || firstChunk || lps.length > 0) {
        const choice = shape.chunkChoice(e.d.text, firstChunk)
        if (lps.length > 0) {
          const l = shape.logprobs(lps, offset)
          choice['logprobs'] = l.value
          offset = l.next
        }
        out.push(JSON.stringify({ ...chunk, choices: [choice], ...usageNull }))
        firstChunk = false
      }
      return out
    }
    if (firstChunk) {
      out.push(JSON.stringify({ ...chunk, choices: [shape.chunkChoice('', true)], ...usageNull }))
      firstChunk = false
    }
    out.push(JSON.stringify({ ...chunk, choices: [{ ...shape.chunkChoice(undefined, false), finish_reason: finishReason(e.r) }], ...usageNull }))
    if (includeUsage) {
      out.push(JSON.stringify({ ...chunk, choices: [], usage: usageOf(e.r) }))
    }
    return out
  }
  return sseResponse(p, g, first, frames, ['[DONE]'])
}

/** Register the OpenAI-compatible routes. */
export function registerOpenAi(app: Hono, o: ResolvedGatewayOptions, door: InferenceDoor, up: Upstream): void {
  const onError = (c: Context) => (e: unknown, p: Passage) => openaiError(c, p.fail(e))
  app.post('/v1/completions', (c) =>
    door.serve(
      httpArrival(c, 'openai', ''),
      async (p) => {
        const b = bodyObject(parseJson(await bodyOf(c, o)))
        p.model = b['model'] as string
        return serveGeneration(c, p, b, completionInput(b), COMPLETION, o)
      },
      onError(c),
    ),
  )
  app.post('/v1/chat/completions', (c) =>
    door.serve(
      httpArrival(c, 'openai', ''),
      async (p) => {
        const b = bodyObject(parseJson(await bodyOf(c, o)))
        p.model = b['model'] as string
        const messages = chatMessages(b['messages'])
        const meta = await up.heldMeta(p.model)
        if (meta.kind !== 'generative') {
          throw new CohortError('BAD_REQUEST', `model "${p.model}" is not generative (kind ${meta.kind}); GET /v1/models lists the generative models`)
        }
        const prompt = applyChatTemplate(meta.generative?.chatTemplate, messages)
        const max = b['max_completion_tokens'] ?? b['max_tokens']
        const input = common(
          b,
          prompt,
          max,
          b['max_completion_tokens'] !== undefined && b['max_completion_tokens'] !== null ? 'max_completion_tokens' : 'max_tokens',
          chatLogprobsAsk(b),
        )
        return serveGeneration(c, p, b, input, CHAT, o)
      },
      onError(c),
    ),
  )
  const listed = (m: { name: string }) => ({ id: m.name, object: 'model', created: 0, owned_by: 'cohort' })
  app.get('/v1/models', async (c) => {
    const { models } = await up.discover()
    return c.json({ object: 'list', data: models.filter((m) => m.kind === 'generative').map(listed) })
  })
  app.get('/v1/models/:model', async (c) => {
    try {
      const m = await up.meta(c.req.param('model'))
      if (m.kind !== 'generative') {
        throw new CohortError('MODEL_NOT_FOUND', `model "${m.name}" is not generative`)
      }
      return c.json(listed(m))
    } catch (e) {
      return openaiError(c, e instanceof CohortError ? e : new CohortError('INTERNAL', 'internal error'))
    }
  })
}
