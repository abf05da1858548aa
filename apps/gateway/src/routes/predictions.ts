import type { Context } from 'hono'
import { CohortError, isTerminal, newPrediction, PREDICTION_ID_RE, type InferRequest, type Prediction } from '@cohort/protocol'
import type { GatewayMetrics } from '@cohort/metrics'
import { bodyOf, clientGone } from '../body.ts'
import { admitAtDoor, deadlineAfter, effectiveTimeoutMs } from '../deadline.ts'
import { RequestObservation } from '../observe.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import type { PredictionJobs } from '../jobs/types.ts'
import { checkInput } from '../jobs/schema.ts'
import { checkModelPath, firstItemError, metricModel } from './infer.ts'
import { CogValidationError, detailOf, parsePredictionBody, unprocessable, wantsAsync, type PredictionRequestBody } from './predictions-body.ts'

/** The model of a Cog route: from the path, else `defaultModel`, else the first a worker reports. */
export async function predictionModel(c: Context, o: ResolvedGatewayOptions, up: Upstream): Promise<string> {
  let model = c.req.param('model') ?? o.defaultModel ?? ''
  if (!model) {
    const { models } = await up.discover()
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
export function predictionsHandler(o: ResolvedGatewayOptions, up: Upstream, metrics: GatewayMetrics, jobs: PredictionJobs) {
  return async function predictions(c: Context): Promise<Response> {
    const t0 = performance.now()
    let model = c.req.param('model') ?? o.defaultModel ?? ''
    let code = 'OK'
    const obs = new RequestObservation(o, c, model)
    try {
      model = await predictionModel(c, o, up)
      obs.model = model
      // Sync predictions only: an async one is queued durably and answered 202 whatever the load.
      const lag = wantsAsync(c) ? 0 : admitAtDoor(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), o.adapter?.queueDelayMs)
      const b = parsePredictionBody(await bodyOf(c, o))
      if (wantsAsync(c)) {
        const r = await submitJob(jobs, up, model, b, b.id ?? crypto.randomUUID())
        return c.json(cogView(r.prediction), 202)
      }
      const id = b.id ?? crypto.randomUUID()
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), undefined)
      const createdAt = new Date().toISOString()
      const req: InferRequest = { v: 1, id: obs.requestId, model, deadline: deadlineAfter(timeoutMs, lag), items: [b.input], ...obs.trace }
      obs.sent(req)
      // Safe to resend if the worker holding it is lost: the client named the prediction.
      const retryable = c.req.header('idempotency-key') !== undefined || b.id !== undefined
      const reply = await up.infer(req, timeoutMs + 50, clientGone(c, o), { retryable })
      firstItemError(reply)
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
    } catch (e) {
      code = e instanceof CohortError ? e.code : e instanceof CogValidationError ? 'INVALID_INPUT' : 'INTERNAL'
      return failure(c, obs, e)
    } finally {
      const label = metricModel(model, code)
      metrics.requests.inc({ model: label, code })
      metrics.duration.observe({ model: label }, (performance.now() - t0) / 1000)
      obs.end()
    }
  }
}

/** 422 for schema failures (Cog's shape), the registry status otherwise. */
function failure(c: Context, obs: RequestObservation, e: unknown): Response {
  if (e instanceof CogValidationError) {
    obs.fail(new CohortError('INVALID_INPUT', e.message), 422)
    return unprocessable(c, e.detail)
  }
  if (e instanceof CohortError && e.code === 'INVALID_INPUT') {
    obs.fail(e, 422)
    return unprocessable(c, detailOf(e.message), e.message)
  }
  throw obs.fail(e)
}

/**
 * Check the model is served (404/503 now rather than a failed job later) and, for schema
 * predictors, the input against its schema (422 now, as Cog), then submit.
 */
async function submitJob(jobs: PredictionJobs, up: Upstream, model: string, b: PredictionRequestBody, id: string) {
  const meta = await up.meta(model)
  if (meta.kind === 'predictor') {
    checkInput(meta.inputSchema, b.input)
  }
  return jobs.submit(
    newPrediction({ id, model, input: b.input, webhook: b.webhook, webhookEventsFilter: b.webhookEventsFilter }),
  )
}

/**
 * `PUT /predictions/{id}` and `PUT /models/{m}/predictions/{id}`: idempotent creation (the same id
 * twice is one prediction). Waits for the result (200) unless `Prefer: respond-async` (202).
 */
export function putPredictionHandler(o: ResolvedGatewayOptions, up: Upstream, jobs: PredictionJobs) {
  return async function putPrediction(c: Context): Promise<Response> {
    const obs = new RequestObservation(o, c, c.req.param('model') ?? '')
    try {
      const id = predictionId(c)
      const model = await predictionModel(c, o, up)
      obs.model = model
      const b = parsePredictionBody(await bodyOf(c, o))
      if (b.id !== undefined && b.id !== id) {
        throw new CogValidationError([{ loc: ['body', 'id'], msg: `id "${b.id}" differs from the path's "${id}"`, type: 'value_error' }])
      }
      const r = await submitJob(jobs, up, model, b, id)
      if (wantsAsync(c)) {
        return c.json(cogView(r.prediction), 202)
      }
      const timeoutMs = effectiveTimeoutMs(o.requestTimeoutMs, c.req.header('x-cohort-timeout-ms'), undefined)
      const p = (await jobs.wait(id, timeoutMs)) ?? r.prediction
      return c.json(cogView(p), isTerminal(p.status) ? 200 : 202)
    } catch (e) {
      return failure(c, obs, e)
    } finally {
      obs.end()
    }
  }
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
