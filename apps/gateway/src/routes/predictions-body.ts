import type { Context } from 'hono'
import { CohortError, MAX_VALUE_DEPTH, deeperThan } from '@cohort/protocol'
import { PREDICTION_ID_RE, WEBHOOK_EVENTS, type WebhookEvent } from '@cohort/predictions'
import { parseJson } from '../body.ts'

/** One entry of Cog's (FastAPI's) 422 `detail` array. */
export interface ValidationDetail {
  loc: (string | number)[]
  msg: string
  type: string
}

/** A request that fails Cog's request validation: answered 422 with `detail`. */
export class CogValidationError extends Error {
  constructor(readonly detail: ValidationDetail[]) {
    super(detail.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; '))
  }
}

/** A Cog PredictionRequest, checked. */
export interface PredictionRequestBody {
  input: unknown
  id?: string
  webhook?: string
  webhookEventsFilter?: WebhookEvent[]
}

/** Parse and check `{"input": ..., "id"?, "webhook"?, "webhook_events_filter"?}`. */
export function parsePredictionBody(bytes: Uint8Array): PredictionRequestBody {
  const body = parseJson(bytes)
  if (typeof body !== 'object' || body === null || !('input' in body)) {
    throw new CohortError('BAD_REQUEST', 'body must be {"input": {...}}')
  }
  const b = body as Record<string, unknown>
  const detail: ValidationDetail[] = []
  const out: PredictionRequestBody = { input: b['input'] }
  // Before anything recursive (schema checks, the msgpack encoder) sees it.
  if (deeperThan(b['input'], MAX_VALUE_DEPTH)) {
    throw new CogValidationError([{ loc: ['body', 'input'], msg: `input nests arrays or objects deeper than ${MAX_VALUE_DEPTH} levels`, type: 'value_error.depth' }])
  }
  if (b['id'] !== undefined && b['id'] !== null) {
    if (typeof b['id'] !== 'string' || !PREDICTION_ID_RE.test(b['id'])) {
      detail.push({ loc: ['body', 'id'], msg: 'id must be 1-128 characters of A-Z a-z 0-9 _ -', type: 'value_error' })
    } else {
      out.id = b['id']
    }
  }
  if (b['webhook'] !== undefined && b['webhook'] !== null) {
    if (typeof b['webhook'] !== 'string' || !/^https?:\/\/[^\s]+$/.test(b['webhook']) || !URL.canParse(b['webhook'])) {
      detail.push({ loc: ['body', 'webhook'], msg: 'invalid or missing URL scheme (http or https)', type: 'value_error.url' })
    } else {
      out.webhook = b['webhook']
    }
  }
  const f = b['webhook_events_filter']
  if (f !== undefined && f !== null) {
    if (!Array.isArray(f)) {
      detail.push({ loc: ['body', 'webhook_events_filter'], msg: 'value is not a valid list', type: 'type_error.list' })
    } else {
      f.forEach((ev, i) => {
        if (!(WEBHOOK_EVENTS as readonly unknown[]).includes(ev)) {
          detail.push({
            loc: ['body', 'webhook_events_filter', i],
            msg: `value is not a valid enumeration member; permitted: ${WEBHOOK_EVENTS.map((e) => `'${e}'`).join(', ')}`,
            type: 'type_error.enum',
          })
        }
      })
      out.webhookEventsFilter = [...new Set(f as WebhookEvent[])]
    }
  }
  if (detail.length > 0) {
    throw new CogValidationError(detail)
  }
  return out
}

/** Cog's `detail` for a worker's INVALID_INPUT message (`item 0: /a/b: Expected number`). */
export function detailOf(message: string): ValidationDetail[] {
  const [, pointer, msg] = /^item \d+: (\/[^:]*): (.*)$/s.exec(message) ?? []
  if (pointer === undefined || msg === undefined) {
    return [{ loc: ['body', 'input'], msg: message, type: 'value_error' }]
  }
  const path = pointer
    .split('/')
    .filter(Boolean)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
  return [{ loc: ['body', 'input', ...path], msg, type: 'value_error' }]
}

/** The 422 answer: Cog's `detail`, plus Cohort's `error` and `code`. */
export function unprocessable(c: Context, detail: ValidationDetail[], message?: string): Response {
  return c.json({ detail, error: message ?? detail.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; '), code: 'INVALID_INPUT', status: 'failed' }, 422)
}

/** True when the client asked for an async answer (`Prefer: respond-async`). */
export function wantsAsync(c: Context): boolean {
  return /(^|[\s,;])respond-async($|[\s,;])/i.test(c.req.header('prefer') ?? '')
}
