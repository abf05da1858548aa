/**
 * Redis Streams ingress: reading one request entry and writing one result, as plain data (no I/O).
 * An entry has the fields `id`, `model`, `input` (JSON) and optionally `webhook`.
 * @module
 */
import { CohortError, isValidModelName } from '@cohort/protocol'
import { PREDICTION_ID_RE, type Prediction } from '@cohort/predictions'

/** One request entry as read from the stream. */
export interface BridgeEntry {
  /** The prediction id: the `id` field, or the entry's stream id when `id` is missing or invalid. */
  id: string
  /** The `model` field ('' when missing). */
  model: string
  /** The parsed `input` (null when missing or unreadable). */
  input: unknown
  webhook?: string
  /** Why the entry cannot run (it gets a failed result at once). */
  error?: CohortError
}

/** Field list (`[k1, v1, k2, v2, ...]`, as XREADGROUP returns it) to an object; the first of a repeated field wins. */
export function fieldMap(fields: readonly string[]): Map<string, string> {
  const m = new Map<string, string>()
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const key = fields[i]
    const value = fields[i + 1]
    if (key !== undefined && value !== undefined && !m.has(key)) {
      m.set(key, value)
    }
  }
  return m
}

/** Read an entry; problems become `error` (BAD_REQUEST), never a throw. */
export function parseEntry(streamId: string, fields: readonly string[]): BridgeEntry {
  const f = fieldMap(fields)
  const rawId = f.get('id')
  const validId = rawId !== undefined && PREDICTION_ID_RE.test(rawId)
  const e: BridgeEntry = { id: validId ? rawId : streamIdAsPredictionId(streamId), model: f.get('model') ?? '', input: null }
  const webhook = f.get('webhook')
  const problems: string[] = []
  if (rawId === undefined) {
    problems.push('field "id" is missing')
  } else if (!validId) {
    problems.push(`field "id" must match ${PREDICTION_ID_RE.source}`)
  }
  if (!e.model) {
    problems.push('field "model" is missing')
  } else if (!isValidModelName(e.model)) {
    problems.push(`field "model" is not a valid model name: "${e.model.slice(0, 64)}"`)
  }
  const raw = f.get('input')
  if (raw === undefined) {
    problems.push('field "input" is missing')
  } else {
    try {
      e.input = JSON.parse(raw)
    } catch (err) {
      problems.push(`field "input" is not JSON: ${err instanceof Error ? err.message : String(err)}`)
    }
  }
  if (webhook !== undefined && webhook !== '') {
    if (/^https?:\/\/./.test(webhook)) {
      e.webhook = webhook
    } else {
      problems.push('field "webhook" must be an http or https URL')
    }
  }
  if (problems.length > 0) {
    e.error = new CohortError('BAD_REQUEST', `stream entry ${streamId}: ${problems.join('; ')}`)
  }
  return e
}

/** A stream id (`1700000000000-0`) already matches the prediction id pattern; kept as is. */
function streamIdAsPredictionId(streamId: string): string {
  return streamId.replace(/[^A-Za-z0-9_-]/g, '_')
}

/** Fields of the result entry XADDed to the results stream. */
export function resultFields(p: Prediction): string[] {
  return ['id', p.id, 'model', p.model, 'status', p.status, 'prediction', JSON.stringify(p)]
}

/**
 * Errors after which an entry is tried again later rather than failed: the item did not run
 * (no worker now, queue full, draining, worker or reply lost).
 */
export function isTransient(e: unknown): boolean {
  return (
    e instanceof CohortError &&
    (e.code === 'NO_WORKER' || e.code === 'OVERLOADED' || e.code === 'SHUTTING_DOWN' || e.code === 'WORKER_LOST' || e.code === 'REPLY_LOST' || e.code === 'NOT_READY')
  )
}
