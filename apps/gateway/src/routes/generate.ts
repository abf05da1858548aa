/**
 * Triton's generate extension (docs/generative.md#triton-generate):
 * `POST /v2/models/{m}[/versions/{v}]/generate` answers `{model_name, model_version, text_output}`;
 * `/generate_stream` answers SSE events of the same shape, one per delta (an error as
 * `{"error": ...}`). Both go through the one door.
 * @module
 */
import type { Context, Hono } from 'hono'
import { CohortError, generateFrom, type GenerateInput } from '@cohort/protocol'
import { bodyOf, clientGone, parseJson } from '../body.ts'
import type { InferenceDoor } from '../door.ts'
import { collect, sseResponse, startGeneration, type GenEvent } from '../generation.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import { httpArrival } from './arrival.ts'
import { headerOf } from '../request-header.ts'

/** Triton/vLLM parameter names -> the sampling field they set. */
const PARAMS: Readonly<Record<string, string>> = {
  max_tokens: 'maxTokens',
  temperature: 'temperature',
  top_p: 'topP',
  top_k: 'topK',
  seed: 'seed',
  stop: 'stop',
  stop_token_ids: 'stopTokenIds',
  ignore_eos: 'ignoreEos',
} as const

/** Default `max_tokens` (vLLM's and OpenAI's). */
export const DEFAULT_MAX_TOKENS = 16

/** The generation of a Triton generate body: `text_input` and `parameters` (also accepted at the top level). */
export function tritonGenerateInput(body: unknown, stream: boolean): GenerateInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new CohortError('BAD_REQUEST', 'body must be a JSON object {"text_input": ..., "parameters": {...}}')
  }
  const { text_input, parameters, ...rest } = body as Record<string, unknown>
  if (typeof text_input !== 'string') {
    throw new CohortError('BAD_REQUEST', 'text_input must be a string')
  }
  if (parameters !== undefined && (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters))) {
    throw new CohortError('BAD_REQUEST', 'parameters must be an object')
  }
  const all: Record<string, unknown> = { ...rest, ...(parameters as Record<string, unknown> | undefined) }
  const params: Record<string, unknown> = { maxTokens: DEFAULT_MAX_TOKENS }
  const names: Record<string, string> = {}
  for (const [k, v] of Object.entries(all)) {
    if (k === 'stream') {
      continue // the route decides
    }
    const key = PARAMS[k]
    if (key === undefined) {
      throw new CohortError('BAD_REQUEST', `parameters.${k.slice(0, 64)} is not a generation parameter; known: ${Object.keys(PARAMS).join(', ')}`)
    }
    params[key] = k === 'stop' && typeof v === 'string' ? [v] : v
    names[key] = `parameters.${k}`
  }
  return generateFrom({ prompt: text_input, params, stream }, 'body', { prompt: 'text_input', ...names })
}

function tritonChunk(model: string, e: GenEvent): string[] {
  if (e.t === 'error') {
    return [JSON.stringify({ error: e.e.message, code: e.e.code })]
  }
  if (e.t === 'delta') {
    return e.d.text === '' ? [] : [JSON.stringify({ model_name: model, model_version: '1', text_output: e.d.text })]
  }
  return [JSON.stringify({ model_name: model, model_version: '1', text_output: '', finish_reason: e.r.finishReason, usage: usageOf(e.r.usage) })]
}

function usageOf(u: { promptTokens: number; completionTokens: number }) {
  return { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.promptTokens + u.completionTokens }
}

/** Register `generate` and `generate_stream` for every model path. */
export function registerTritonGenerate(app: Hono, o: ResolvedGatewayOptions, door: InferenceDoor): void {
  const handler = (stream: boolean) => (c: Context) => {
    const model = c.req.param('model') ?? ''
    return door.serve(httpArrival(c, 'generate', model, c.req.param('version')), async (p) => {
      const input = tritonGenerateInput(parseJson(await bodyOf(c, o)), stream)
      const g = startGeneration(p, input, { signal: clientGone(c, o), retryable: headerOf(c, 'idempotency-key') !== undefined })
      if (!stream) {
        const r = await collect(g)
        return c.json({ model_name: model, model_version: '1', text_output: r.text, finish_reason: r.finishReason, usage: usageOf(r.usage) })
      }
      const first = await g.next()
      if (first.t === 'error') {
        throw first.e // answered with its status: nothing was streamed yet
      }
      return sseResponse(p, g, first, (e) => tritonChunk(model, e))
    })
  }
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.post(`${base}/generate`, handler(false))
    app.post(`${base}/generate_stream`, handler(true))
  }
}
