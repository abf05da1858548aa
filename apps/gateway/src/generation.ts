/**
 * One generation through the door (docs/generative.md): sent as an envelope with `generate`, its
 * token deltas (protocol v2 `tokens` notices, through the packer) and its end come back as one
 * ordered stream of events that the HTTP codecs (Triton generate, OpenAI) encode. The consumer
 * stopping early (the client went away) cancels the generation: the worker frees its slot at the
 * next step.
 * @module
 */
import { CohortError, type GenerateInput, type GenerateResult, type TokenDelta } from '@cohort/protocol'
import type { AbortSignalLike } from '@cohort/transport'
import type { Passage } from './door.ts'

/** What a generation yields, in order: deltas, then one `done` or `error`. */
export type GenEvent = { t: 'delta'; d: TokenDelta } | { t: 'done'; r: GenerateResult } | { t: 'error'; e: CohortError }

/** A running generation: pull its events in order; `cancel` ends it (idempotent). */
export interface Generation {
  next(): Promise<GenEvent>
  cancel(): void
}

/** How a generation is sent: its budget, the client's disconnect signal, whether it may be resent. */
export interface GenerationOptions {
  /** The whole generation's budget, ms. @default the passage's {@link Passage.generationBudget} */
  timeoutMs?: number
  signal?: AbortSignalLike | undefined
  retryable?: boolean
}

/**
 * Start one generation through `p` (its deadline, tenant, trace and metrics apply). Deltas arrive
 * while it runs when `input.stream` is set and the workers speak protocol v2; whatever of the final
 * text no delta carried (all of it over protocol v1, or non-streamed) comes as one last delta, so
 * the deltas of a stream always add up to the reply's text.
 */
export function startGeneration(p: Passage, input: GenerateInput, o: GenerationOptions = {}): Generation {
  const events: GenEvent[] = []
  let waiter: ((e: GenEvent) => void) | undefined
  let ended = false
  let sent = ''
  const push = (e: GenEvent) => {
    if (ended) {
      return
    }
    if (e.t !== 'delta') {
      ended = true
    }
    if (waiter) {
      const w = waiter
      waiter = undefined
      w(e)
    } else {
      events.push(e)
    }
  }
  const abort = new AbortController()
  const onClientGone = () => abort.abort()
  o.signal?.addEventListener('abort', onClientGone, { once: true })
  if (o.signal?.aborted) {
    abort.abort()
  }
  void (async () => {
    // The budgets: the whole generation and its first token (docs/generative.md#deadlines-and-the-server-slo).
    const b = await p.generationBudget()
    const timeoutMs = o.timeoutMs ?? b.timeoutMs
    const generate: GenerateInput = b.ttftMs === undefined ? input : { ...input, firstTokenDeadline: p.deadline(b.ttftMs) }
    return p.infer(
      { generate },
      {
        timeoutMs,
        retryable: o.retryable === true,
        signal: abort.signal,
        onDelta: input.stream
          ? (s) => {
              sent += s.text
              push({ t: 'delta', d: { tokens: s.tokens, text: s.text, ...(s.logprobs ? { logprobs: s.logprobs } : {}) } })
            }
          : undefined,
      },
    )
  })()
    .then(
      (reply) => {
        const r = reply.generated
        if (!r) {
          push({ t: 'error', e: new CohortError('INTERNAL', `the worker answered generation ${p.requestId} without a result`) })
          return
        }
        if (input.stream && r.text.length > sent.length && r.text.startsWith(sent)) {
          push({ t: 'delta', d: { tokens: [], text: r.text.slice(sent.length) } })
        }
        push({ t: 'done', r })
      },
      (e: unknown) => push({ t: 'error', e: e instanceof CohortError ? e : p.fail(e) }),
    )
    .finally(() => o.signal?.removeEventListener('abort', onClientGone))
  return {
    next() {
      const e = events.shift()
      if (e) {
        return Promise.resolve(e)
      }
      if (ended) {
        return Promise.resolve({ t: 'error', e: new CohortError('CANCELLED', 'the generation was cancelled') })
      }
      return new Promise((resolve) => {
        waiter = resolve
      })
    },
    cancel() {
      abort.abort()
    },
  }
}

const enc = new TextEncoder()

/** `Content-Type` of the event streams (Triton's generate_stream and OpenAI's `stream: true`). */
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8'

/**
 * The SSE response of a generation whose first event has come (not an error: that one is answered
 * with its HTTP status instead). `frames` encodes each event as `data:` payloads; `tail` is sent
 * after a normal end (OpenAI's `[DONE]`). The passage is ended when the stream ends or the client
 * goes away (which cancels the generation).
 */
export function sseResponse(p: Passage, g: Generation, first: GenEvent, frames: (e: GenEvent) => string[], tail: string[] = []): Response {
  p.keepOpen()
  let pending: GenEvent | undefined = first
  let done = false
  const finish = () => {
    if (!done) {
      done = true
      p.end()
    }
  }
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      // Loop until something is enqueued or the stream ends: a pull that enqueues nothing is not
      // called again, which would stall the stream on a delta with no text (held-back bytes).
      for (;;) {
        const e = pending ?? (await g.next())
        pending = undefined
        const out = frames(e).map((f) => `data: ${f}\n\n`)
        if (e.t === 'done') {
          out.push(...tail.map((f) => `data: ${f}\n\n`))
        }
        if (out.length > 0) {
          controller.enqueue(enc.encode(out.join('')))
        }
        if (e.t !== 'delta') {
          if (e.t === 'error') {
            p.fail(e.e)
          }
          controller.close()
          finish()
          return
        }
        if (out.length > 0) {
          return
        }
      }
    },
    cancel() {
      g.cancel()
      p.fail(new CohortError('CANCELLED', 'the client closed the stream'))
      finish()
    },
  })
  return new Response(stream, { headers: { 'content-type': SSE_CONTENT_TYPE, 'cache-control': 'no-cache' } })
}

/** The whole output of a non-streamed generation (or its error, thrown). */
export async function collect(g: Generation): Promise<GenerateResult> {
  for (;;) {
    const e = await g.next()
    if (e.t === 'done') {
      return e.r
    }
    if (e.t === 'error') {
      throw e.e
    }
  }
}
