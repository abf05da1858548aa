import type { Context } from 'hono'
import { CohortError } from '@cohort/protocol'
import { bodyOf, parseJson } from '../body.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath } from './infer.ts'

/** Batching fields an operator may change at runtime, with their checks. */
const FIELDS: Record<string, (v: unknown) => boolean> = {
  maxBatchSize: (v) => Number.isInteger(v) && (v as number) >= 1,
  maxDelayMs: (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0,
  policy: (v) => v === 'eager' || v === 'timer' || v === 'deadline',
  maxQueue: (v) => Number.isInteger(v) && (v as number) >= 1,
  maxBatchCost: (v) => v === null || (typeof v === 'number' && v > 0),
  admission: (v) => typeof v === 'boolean',
  autoBatchSize: (v) => typeof v === 'boolean',
}

/** The self-tuned batch cap as the worker reports it in its metadata (`autoBatchSize`, `batchCap`). */
function liveCap(live: object): { autoBatchSize: boolean | null; batchCap: number | null } {
  const m = live as { autoBatchSize?: unknown; batchCap?: unknown }
  return {
    autoBatchSize: typeof m.autoBatchSize === 'boolean' ? m.autoBatchSize : null,
    batchCap: typeof m.batchCap === 'number' ? m.batchCap : null,
  }
}

/** Check `Authorization: Bearer KEY` against the admin keys, when any are configured. */
export function requireAdmin(c: Context, keys: readonly string[] | undefined): void {
  if (!keys || keys.length === 0) {
    return
  }
  const h = c.req.header('authorization') ?? ''
  const m = /^Bearer\s+(.+)$/i.exec(h)
  if (!m) {
    throw new CohortError('UNAUTHORIZED', 'admin routes need Authorization: Bearer <admin key>')
  }
  if (!keys.includes(m[1]!.trim())) {
    throw new CohortError('FORBIDDEN', 'this key may not use admin routes')
  }
}

/** Validate a batching patch; unknown keys and bad values are 400. */
export function parseBatchingPatch(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new CohortError('BAD_REQUEST', 'body must be a JSON object of batching settings')
  }
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(body)) {
    const check = FIELDS[k]
    if (!check) {
      throw new CohortError('BAD_REQUEST', `unknown batching setting "${k}" (known: ${Object.keys(FIELDS).join(', ')})`)
    }
    if (!check(v)) {
      throw new CohortError('BAD_REQUEST', `invalid value for ${k}: ${JSON.stringify(v)}`)
    }
    out[k] = v
  }
  return out
}

/** `GET|PUT /admin/models/{m}/batching`: the model's runtime batching config in NATS KV. */
export function adminRoutes(o: ResolvedGatewayOptions & { adminKeys?: readonly string[] }, up: Upstream) {
  return {
    async get(c: Context): Promise<Response> {
      requireAdmin(c, o.adminKeys)
      const model = c.req.param('model') ?? ''
      checkModelPath(model, undefined)
      const stored = (await o.transport.config.get(model)) ?? {}
      const live = await up.meta(model)
      return c.json({
        model,
        stored,
        live: { maxBatchSize: live.maxBatchSize, maxDelayMs: live.maxDelayMs, policy: live.policy, maxQueue: live.maxQueue, maxBatchCost: live.maxBatchCost ?? null, admission: live.admission ?? null, ...liveCap(live) },
      })
    },
    async put(c: Context): Promise<Response> {
      requireAdmin(c, o.adminKeys)
      const model = c.req.param('model') ?? ''
      checkModelPath(model, undefined)
      const patch = parseBatchingPatch(parseJson(await bodyOf(c, o, 64 * 1024)))
      await up.meta(model) // 404 for unknown models
      const merged = { ...((await o.transport.config.get(model)) ?? {}), ...patch }
      await o.transport.config.put(model, merged)
      return c.json({ model, stored: merged })
    },
  }
}
