import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import { isTerminal, newPrediction, PREDICTION_ID_RE, type Prediction } from '@cohort/predictions'
import { bodyOf, clientGone } from '../body.ts'
import type { InferenceDoor, Passage } from '../door.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import type { PredictionJobs } from '../jobs/types.ts'
import { checkInput } from '../jobs/schema.ts'
import { httpArrival } from './arrival.ts'
import { checkModelPath } from './infer.ts'
import { CogValidationError, detailOf, parsePredictionBody, unprocessable, wantsAsync, type PredictionRequestBody } from './predictions-body.ts'
import { headerOf } from '../request-header.ts'

/** The model of a Cog route: from the path, else `defaultModel`, else the first a worker reports. */
export async function predictionModel(c: Context, o: ResolvedGatewayOptions, up: Upstream): Promise<string> {
  let model = c.req.param('model') ?? o.defaultModel ?? ''
  if (!model) {
    const { models } = await up.heldModels()
    model = models[0]?.name ?? ''
    if (!model) {
      throw new CohortError('NO_WORKER', 'no model is being served')
    }
  }
  checkModelPath(model, undefined)
  return model
}

/** Cog's prediction object as answered (with `webhook` and its filter, as Cog answers them). */
export function cogView(p: Prediction): Record<string, unknown> {
  return { ...p }
}

/**
 * `POST /predictions` and `POST /models/{m}/predictions` (Cog-style): synchronous by default,
 * `{"input": {...}}` -> `{"status": "succeeded", "output": ...}`; with `Prefer: respond-async` the
 * prediction becomes a job (202 + the prediction). Schema failures are 422 with Cog's `detail`.
 */
export function predictionsHandler(o: ResolvedGatewayOptions, door: InferenceDoor, jobs: PredictionJobs) {
  const up = door.o.upstream
  return function predictions(c: Context): Promise<Response> {
    // Sync predictions are admitted; an async one is queued durably and answered 202 whatever the
    // load (origin `submit`): its run is admitted as a `job`.
    return door.serve(
      httpArrival(c, wantsAsync(c) ? 'submit' : 'predictions', c.req.param('model') ?? o.defaultModel ?? ''),
      async (p) => {
        const model = await predictionModel(c, o, up)
        p.model = model
        const b = parsePredictionBody(await bodyOf(c, o))
        if (wantsAsync(c)) {
          const r = await submitJob(jobs, up, model, b, b.id ?? crypto.randomUUID())
          return c.json(cogView(r.prediction), 202)
        }
        const id = b.id ?? crypto.randomUUID()
        const createdAt = new Date().toISOString()
        // Safe to resend if the worker holding it is lost: the client named the prediction.
        const retryable = headerOf(c, 'idempotency-key') !== undefined || b.id !== undefined
        const reply = await p.infer({ items: [b.input] }, { retryable, signal: clientGone(c, o) })
        const predictTime = reply.timing?.[0]?.computeMs
        return c.json({
          id,
          status: 'succeeded',
          input: b.input,
          output: reply.items?.[0] ?? null,
          created_at: createdAt,
          completed_at: new Date().toISOString(),
          metrics: predictTime !== undefined ? { predict_time: predictTime / 1000 } : {},
        })
      },
      (e, p) => failure(c, p, e),
    )
  }
}

/** 422 for schema failures (Cog's shape), the registry status otherwise. */
function failure(c: Context, p: Passage, e: unknown): Response {
  if (e instanceof CogValidationError) {
    p.fail(new CohortError('INVALID_INPUT', e.message), 422)
    return unprocessable(c, e.detail)
  }
  if (e instanceof CohortError && e.code === 'INVALID_INPUT') {
    p.fail(e, 422)
    return unprocessable(c, detailOf(e.message), e.message)
  }
  throw p.fail(e)
}

/**
 * Check the model is served (404/503 now rather than a failed job later) and, for schema
 * predictors, the input against its schema (422 now, as Cog), then submit.
 */
async function submitJob(jobs: PredictionJobs, up: Upstream, model: string, b: PredictionRequestBody, id: string) {
  const meta = await up.heldMeta(model)
  if (meta.kind === 'predictor') {
    checkInput(meta.inputSchema, b.input)
  }
  return jobs.submit(newPrediction({ id, model, input: b.input, webhook: b.webhook, webhookEventsFilter: b.webhookEventsFilter }))
}

/**
 * `PUT /predictions/{id}` and `PUT /models/{m}/predictions/{id}`: idempotent creation (the same id
 * twice is one prediction). Waits for the result (200) unless `Prefer: respond-async` (202).
 */
export function putPredictionHandler(o: ResolvedGatewayOptions, door: InferenceDoor, jobs: PredictionJobs) {
  const up = door.o.upstream
  return function putPrediction(c: Context): Promise<Response> {
    return door.serve(
      httpArrival(c, 'submit', c.req.param('model') ?? ''),
      async (p) => {
        // Not counted in the request metrics (as before the door): the job's run is the work.
        p.counted = false
        const id = predictionId(c)
        const model = await predictionModel(c, o, up)
        p.model = model
        const b = parsePredictionBody(await bodyOf(c, o))
        if (b.id !== undefined && b.id !== id) {
          throw new CogValidationError([{ loc: ['body', 'id'], msg: `id "${b.id}" differs from the path's "${id}"`, type: 'value_error' }])
        }
        const r = await submitJob(jobs, up, model, b, id)
        if (!r.created) {
          sameRequest(r.prediction, model, b)
        }
        if (wantsAsync(c)) {
          return c.json(cogView(r.prediction), 202)
        }
        const pr = (await jobs.wait(id, p.timeoutMs())) ?? r.prediction
        return c.json(cogView(pr), isTerminal(pr.status) ? 200 : 202)
      },
      (e, p) => failure(c, p, e),
    )
  }
}

/**
 * An idempotent PUT of an id that exists must repeat its request: a different model, input or
 * webhook is 409 CONFLICT naming the id (Cog answers a conflict too), not the old prediction.
 */
function sameRequest(existing: Prediction, model: string, b: PredictionRequestBody): void {
  const differs = existing.model !== model ? 'model' : !sameJson(existing.input, b.input) ? 'input' : (existing.webhook ?? undefined) !== b.webhook ? 'webhook' : undefined
  if (differs) {
    throw new CohortError('CONFLICT', `prediction "${existing.id}" already exists with a different ${differs}; use a new id for a new prediction`)
  }
}

/** Structural equality of two JSON values (key order ignored). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) {
    return true
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) {
    return false
  }
  if (Array.isArray(a)) {
    const bb = b as unknown[]
    return a.length === bb.length && a.every((x, i) => sameJson(x, bb[i]))
  }
  const ka = Object.keys(a)
  const bo = b as Record<string, unknown>
  return ka.length === Object.keys(bo).length && ka.every((k) => Object.hasOwn(bo, k) && sameJson((a as Record<string, unknown>)[k], bo[k]))
}

/** `GET /predictions/{id}`: the prediction as stored (any gateway answers; see docs/predictions.md). */
export function getPredictionHandler(jobs: PredictionJobs) {
  return async function getPrediction(c: Context): Promise<Response> {
    const id = predictionId(c)
    return c.json(cogView(await known(jobs.get(id), id)))
  }
}

/** `POST /predictions/{id}/cancel`: 200 with the prediction (now `canceled` unless it had finished), 404 if unknown. */
export function cancelPredictionHandler(jobs: PredictionJobs) {
  return async function cancelPrediction(c: Context): Promise<Response> {
    const id = predictionId(c)
    return c.json(cogView(await known(jobs.cancel(id), id)))
  }
}

function predictionId(c: Context): string {
  const id = c.req.param('id') ?? ''
  if (!PREDICTION_ID_RE.test(id)) {
    throw new CohortError('PREDICTION_NOT_FOUND', `"${id}" is not a valid prediction id`)
  }
  return id
}

async function known(p: Promise<Prediction | undefined>, id: string): Promise<Prediction> {
  const v = await p
  if (!v) {
    throw new CohortError('PREDICTION_NOT_FOUND', `no prediction "${id}"`)
  }
  return v
}
