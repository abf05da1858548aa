import type { Context } from 'hono'
import { type ModelMeta, type TensorMeta } from '@cohort/protocol'
import { PREDICTION_ID_RE, WEBHOOK_EVENTS } from '@cohort/predictions'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'

/** JSON Schema of one item of an ONNX tensor: nested arrays (no batch dim) of the datatype's scalar. */
export function tensorItemSchema(t: TensorMeta): Record<string, unknown> {
  const dt = t.datatype.toUpperCase()
  let s: Record<string, unknown> =
    dt === 'BYTES' || dt === 'STRING' ? { type: 'string' } : dt === 'BOOL' ? { type: 'boolean' } : /^U?INT/.test(dt) ? { type: 'integer' } : { type: 'number' }
  for (const d of [...t.shape.slice(1)].reverse()) {
    s = { type: 'array', items: s, ...(d > 0 ? { minItems: d, maxItems: d } : {}) }
  }
  return { title: t.name, ...s }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null

/**
 * A schema whose `required` leaves out the properties that have a `default` (TypeBox lists them,
 * but a request may omit them: the default is applied), recursively through nested objects.
 */
export function withoutDefaultsRequired(s: Record<string, unknown>): Record<string, unknown> {
  const props = s['properties']
  if (typeof props !== 'object' || props === null) {
    return s
  }
  const p = props as Record<string, unknown>
  const properties = Object.fromEntries(Object.entries(p).map(([k, v]) => [k, isRecord(v) ? withoutDefaultsRequired(v) : v]))
  const out: Record<string, unknown> = { ...s, properties }
  if (Array.isArray(s['required'])) {
    const required = (s['required'] as string[]).filter((k) => {
      const prop = p[k]
      return !(isRecord(prop) && 'default' in prop)
    })
    if (required.length > 0) {
      out['required'] = required
    } else {
      delete out['required']
    }
  }
  return out
}

/** Cog's `Input` of a model: the predictor's schema, or an object of the ONNX inputs. */
export function inputSchema(m: ModelMeta): Record<string, unknown> {
  if (m.kind === 'predictor' && m.inputSchema && typeof m.inputSchema === 'object') {
    return { title: 'Input', ...withoutDefaultsRequired(m.inputSchema as Record<string, unknown>) }
  }
  return {
    title: 'Input',
    type: 'object',
    properties: Object.fromEntries(m.inputs.map((t) => [t.name, tensorItemSchema(t)])),
    required: m.inputs.map((t) => t.name),
  }
}

/** Cog's `Output` of a model: the predictor's output schema, or an object of the ONNX outputs. */
export function outputSchema(m: ModelMeta): Record<string, unknown> {
  if (m.kind === 'predictor') {
    return { title: 'Output', ...((m.outputSchema as Record<string, unknown> | undefined) ?? {}) }
  }
  return {
    title: 'Output',
    type: 'object',
    properties: Object.fromEntries(m.outputs.map((t) => [t.name, tensorItemSchema(t)])),
  }
}

/** Cog's OpenAPI document for the default model, plus per-model `Input_<m>`/`Output_<m>` components. */
export function openApi(models: ModelMeta[], defaultModel: string, version: string): Record<string, unknown> {
  const schemas = componentSchemas(
    models,
    models.find((m) => m.name === defaultModel),
  )
  return {
    openapi: '3.0.2',
    info: { title: 'Cohort', version },
    paths: predictionPaths(),
    components: { schemas },
  }
}

const ref = (n: string) => ({ $ref: `#/components/schemas/${n}` })
const json = (schema: unknown) => ({ content: { 'application/json': { schema } } })

/** The `properties` of a PredictionRequest. */
function predictionRequestProperties(): Record<string, unknown> {
  // As parsePredictionBody checks: `input` is required; `id`, `webhook` and the filter may be
  // null (taken as absent); an id is PREDICTION_ID_RE, a webhook an http(s) URL.
  return {
    input: ref('Input'),
    id: { title: 'Id', type: 'string', pattern: PREDICTION_ID_RE.source, nullable: true },
    created_at: { title: 'Created At', description: 'Accepted and ignored: the gateway sets created_at.' },
    webhook: { title: 'Webhook', type: 'string', format: 'uri', pattern: '^https?://[^\\s]+$', minLength: 1, maxLength: 65536, nullable: true },
    webhook_events_filter: { type: 'array', items: ref('WebhookEvent'), default: [...WEBHOOK_EVENTS], nullable: true },
  }
}

/** The document's component schemas: Cog's, the default model's Input/Output, one pair per model, and Error. */
function componentSchemas(models: ModelMeta[], def: ModelMeta | undefined): Record<string, unknown> {
  const schemas: Record<string, unknown> = {
    Status: { title: 'Status', description: 'An enumeration.', enum: ['starting', 'processing', 'succeeded', 'canceled', 'failed'], type: 'string' },
    WebhookEvent: { title: 'WebhookEvent', description: 'An enumeration.', enum: [...WEBHOOK_EVENTS], type: 'string' },
    ValidationError: {
      title: 'ValidationError',
      required: ['loc', 'msg', 'type'],
      type: 'object',
      properties: {
        loc: { title: 'Location', type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
        msg: { title: 'Message', type: 'string' },
        type: { title: 'Error Type', type: 'string' },
      },
    },
    HTTPValidationError: {
      title: 'HTTPValidationError',
      type: 'object',
      properties: { detail: { title: 'Detail', type: 'array', items: ref('ValidationError') } },
    },
    Input: def ? inputSchema(def) : { title: 'Input', type: 'object' },
    Output: def ? outputSchema(def) : { title: 'Output' },
    PredictionRequest: {
      title: 'PredictionRequest',
      type: 'object',
      properties: predictionRequestProperties(),
      required: ['input'],
    },
    PredictionResponse: {
      title: 'PredictionResponse',
      type: 'object',
      properties: {
        // null until set (libs/predictions' Prediction): output, error, started_at, completed_at.
        input: ref('Input'),
        output: { title: 'Output', nullable: true, allOf: [ref('Output')] },
        id: { title: 'Id', type: 'string' },
        model: { title: 'Model', type: 'string' },
        status: ref('Status'),
        error: { title: 'Error', type: 'string', nullable: true },
        code: { title: 'Code', type: 'string', nullable: true, description: 'Cohort error code (docs/errors.md) of a failed prediction.' },
        logs: { title: 'Logs', type: 'string', default: '' },
        created_at: { title: 'Created At', type: 'string', format: 'date-time' },
        started_at: { title: 'Started At', type: 'string', format: 'date-time', nullable: true },
        completed_at: { title: 'Completed At', type: 'string', format: 'date-time', nullable: true },
        metrics: { title: 'Metrics', type: 'object', nullable: true },
        webhook: { title: 'Webhook', type: 'string', format: 'uri', nullable: true },
        webhook_events_filter: { type: 'array', items: ref('WebhookEvent'), nullable: true },
      },
    },
  }
  for (const m of models) {
    schemas[`Input_${m.name}`] = { ...inputSchema(m), title: `Input_${m.name}` }
    schemas[`Output_${m.name}`] = { ...outputSchema(m), title: `Output_${m.name}` }
  }
  schemas['Error'] = {
    title: 'Error',
    type: 'object',
    properties: { error: { title: 'Error', type: 'string' }, code: { title: 'Code', type: 'string' } },
    required: ['error', 'code'],
  }
  return schemas
}

/** The prediction routes' paths. */
function predictionPaths(): Record<string, unknown> {
  const putProperties = Object.fromEntries(Object.entries(predictionRequestProperties()).filter(([k]) => k !== 'id'))
  const idempotentRequest = {
    title: 'Prediction Request',
    description: "A PredictionRequest whose `id`, when given, must equal the path's prediction_id (else 422).",
    type: 'object',
    properties: putProperties,
    required: ['input'],
  }
  // The answers every prediction route can give besides success (docs/errors.md): `{error, code}`.
  const err = (description: string) => ({ description, ...json(ref('Error')) })
  const errors = {
    '400': err('Bad Request: the body is not JSON, not {"input": ...}, or holds a number beyond the double range'),
    '404': err('Not Found: no such model or prediction'),
    '413': err('Payload Too Large: the body exceeds the body limit or the in-flight bytes bound'),
    '503': err('Service Unavailable: no worker, overloaded (see Retry-After) or draining'),
  }
  const respond = (ok: string, schema: unknown, extra: Record<string, unknown> = {}) => ({
    [ok]: { description: 'Successful Response', ...json(schema) },
    '422': { description: 'Validation Error', ...json(ref('HTTPValidationError')) },
    ...errors,
    ...extra,
  })
  const accepted = { '202': { description: 'Accepted (with Prefer: respond-async)', ...json(ref('PredictionResponse')) } }
  const prefer = { name: 'prefer', in: 'header', required: false, schema: { title: 'Prefer', type: 'string' } }
  const idParam = { name: 'prediction_id', in: 'path', required: true, schema: { title: 'Prediction ID', type: 'string', pattern: PREDICTION_ID_RE.source } }
  return {
    '/health-check': { get: { summary: 'Healthcheck', operationId: 'healthcheck_health_check_get', responses: { '200': { description: 'Successful Response', ...json({}) } } } },
    '/predictions': {
      post: {
        summary: 'Predict',
        description: 'Run a single prediction on the model',
        operationId: 'predict_predictions_post',
        parameters: [prefer],
        requestBody: { ...json(ref('PredictionRequest')), required: true },
        responses: respond('200', ref('PredictionResponse'), accepted),
      },
    },
    '/predictions/{prediction_id}': {
      put: {
        summary: 'Predict Idempotent',
        description: 'Run a single prediction on the model (idempotent creation).',
        operationId: 'predict_idempotent_predictions__prediction_id__put',
        parameters: [idParam, prefer],
        // The path names the id: a body `id` other than it is a 422, so the body schema has none.
        requestBody: { ...json(idempotentRequest), required: true },
        responses: respond('200', ref('PredictionResponse'), { ...accepted, '409': err('Conflict: the id is taken by a different request') }),
      },
      get: {
        summary: 'Get Prediction',
        operationId: 'get_prediction_predictions__prediction_id__get',
        parameters: [idParam],
        responses: respond('200', ref('PredictionResponse')),
      },
    },
    '/predictions/{prediction_id}/cancel': {
      post: {
        summary: 'Cancel',
        description: 'Cancel a running prediction',
        operationId: 'cancel_predictions__prediction_id__cancel_post',
        parameters: [idParam],
        responses: respond('200', {}),
      },
    },
  }
}

/** `GET /openapi.json` (from the workers' model metadata) and Cog's `GET /health-check`. */
export function predictionMetaRoutes(o: ResolvedGatewayOptions, up: Upstream) {
  const defaultOf = (models: ModelMeta[]) => o.defaultModel ?? [...models].sort((a, b) => a.name.localeCompare(b.name))[0]?.name ?? ''
  return {
    async openapi(c: Context): Promise<Response> {
      const { models } = await up.discover()
      return c.json(openApi(models, defaultOf(models), o.serverVersion))
    },
    /**
     * Always 200, as Cog: `STARTING` while no worker serves the default model or it is loading,
     * `BUSY` when its queue is full (new work would be shed), else `READY`. Cohort workers that fail
     * setup exit, so `SETUP_FAILED` is never reported by this gateway.
     */
    async healthCheck(c: Context): Promise<Response> {
      const { models } = await up.discover()
      const name = defaultOf(models)
      const m = models.find((x) => x.name === name)
      const status = !m || !m.ready ? 'STARTING' : m.maxQueue !== undefined && (m.queued ?? 0) >= m.maxQueue ? 'BUSY' : 'READY'
      return c.json({ status, setup: m?.ready ? { status: 'succeeded', logs: '' } : { status: 'starting', logs: '' } })
    },
  }
}
