import type { Context } from 'hono'
import { BATCHING_KEYS, batchingToJson, isBatchingKey, parseBatchingPatch as parseFields, type BatchingConfig } from '@cohort/batching'
import { CohortError } from '@cohort/protocol'
import { bodyOf, parseJson } from '../body.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { checkModelPath } from './infer.ts'
import { bearerToken, keyIndex } from '../middleware/auth/credentials.ts'
import { headerOf } from '../request-header.ts'

/** Largest admin patch body, bytes. */
export const MAX_ADMIN_BODY_BYTES = 64 * 1024

/** The self-tuned batch cap as the worker reports it in its metadata (`autoBatchSize`, `batchCap`). */
function liveCap(live: object): { autoBatchSize: boolean | null; batchCap: number | null } {
  const m = live as { autoBatchSize?: unknown; batchCap?: unknown }
  return {
    autoBatchSize: typeof m.autoBatchSize === 'boolean' ? m.autoBatchSize : null,
    batchCap: typeof m.batchCap === 'number' ? m.batchCap : null,
  }
}

/**
 * Check `Authorization: Bearer KEY` against the admin keys, when any are configured. Returns who
 * is asking for the audit log: `admin key #N` (1-based, never the key), or `open` without keys.
 */
export function requireAdmin(c: Context, keys: readonly string[] | undefined): string {
  if (!keys || keys.length === 0) {
    return 'open (no admin keys)'
  }
  const cred = bearerToken(headerOf(c, 'authorization'))
  if (typeof cred !== 'string') {
    throw new CohortError('UNAUTHORIZED', 'admin routes need Authorization: Bearer <admin key>')
  }
  const found = keyIndex(keys, cred)
  if (found < 0) {
    throw new CohortError('FORBIDDEN', 'this key may not use admin routes')
  }
  return `admin key #${found + 1}`
}

/**
 * Validate a batching patch against `@cohort/batching`'s field table (own known keys only, bounded
 * values); anything else is 400. Returns the patch in its JSON form (`maxBatchCost: null` = none).
 */
export function parseBatchingPatch(body: unknown): Record<string, unknown> {
  let patch: Partial<BatchingConfig>
  try {
    patch = parseFields(body, { strict: true })
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e)
    const hint = / null \(/.test(msg) ? ' (to remove an override and restore the lower layer: DELETE /admin/models/{m}/batching?fields=NAME)' : ''
    throw new CohortError('BAD_REQUEST', msg + hint)
  }
  const json = batchingToJson(patch)
  return Object.fromEntries(Object.keys(patch).map((k) => [k, json[k as keyof BatchingConfig]]))
}

/** The stored runtime config's batching fields (known keys only; others, stored by older versions, dropped). */
function storedFields(stored: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(stored ?? {})) {
    try {
      Object.assign(out, parseBatchingPatch({ [k]: v }))
    } catch {
      // Unknown or invalid: not a setting (never applied by workers either).
    }
  }
  return out
}

/** A PUT's `maxBatchSize` past the model's own hard limit (reported in its metadata) is 400. */
function checkBatchLimit(model: string, patch: Record<string, unknown>, live: object): void {
  const limit = (live as { batchLimit?: { maxBatchSize?: unknown; reason?: unknown } }).batchLimit
  const n = patch['maxBatchSize']
  if (limit && typeof limit.maxBatchSize === 'number' && typeof n === 'number' && n > limit.maxBatchSize) {
    throw new CohortError('BAD_REQUEST', `maxBatchSize ${n} exceeds model "${model}"'s limit of ${limit.maxBatchSize}: ${String(limit.reason)}`)
  }
}

/**
 * `GET|PUT|DELETE /admin/models/{m}/batching`: the model's runtime batching override in NATS KV,
 * the top layer over the worker's flags and the model's own values (docs/repository.md#configuration).
 */
export function adminRoutes(o: ResolvedGatewayOptions & { adminKeys?: readonly string[] }, up: Upstream) {
  return {
    async get(c: Context): Promise<Response> {
      requireAdmin(c, o.adminKeys)
      const model = c.req.param('model') ?? ''
      checkModelPath(model, undefined)
      const stored = (await o.transport.config.get(model)) ?? {}
      const live = await up.meta(model)
      const sources = (live as { configSources?: unknown }).configSources ?? null
      return c.json({ model, stored, live: { ...batchingToJson(live as Partial<BatchingConfig>), batchCap: liveCap(live).batchCap }, sources })
    },
    async put(c: Context): Promise<Response> {
      const who = requireAdmin(c, o.adminKeys)
      const model = c.req.param('model') ?? ''
      checkModelPath(model, undefined)
      const patch = parseBatchingPatch(parseJson(await bodyOf(c, o, MAX_ADMIN_BODY_BYTES)))
      const live = await up.meta(model) // 404 for unknown models
      checkBatchLimit(model, patch, live)
      const before = storedFields(await o.transport.config.get(model))
      const after = { ...before, ...patch }
      await o.transport.config.put(model, after)
      // The audit line: who changed what, from what, to what (one per accepted change).
      o.logger.info(
        { audit: 'admin.batching', who, client: o.adapter?.clientAddress?.(c) ?? headerOf(c, 'x-forwarded-for') ?? null, model, patch, before, after },
        'admin: batching configuration changed',
      )
      return c.json({ model, stored: after })
    },
    /**
     * Remove the runtime override: all of it, or only `?fields=a,b` (comma-separated field names).
     * Each worker then serves those fields from its flags, the model's own value or the default.
     */
    async delete(c: Context): Promise<Response> {
      const who = requireAdmin(c, o.adminKeys)
      const model = c.req.param('model') ?? ''
      checkModelPath(model, undefined)
      const q = c.req.query('fields')
      const fields =
        q === undefined
          ? undefined
          : q
              .split(',')
              .map((f) => f.trim())
              .filter(Boolean)
      for (const f of fields ?? []) {
        if (!isBatchingKey(f)) {
          throw new CohortError('BAD_REQUEST', `unknown batching setting ${JSON.stringify(f)} in ?fields (known: ${BATCHING_KEYS.join(', ')})`)
        }
      }
      await up.meta(model) // 404 for unknown models
      const before = storedFields(await o.transport.config.get(model))
      const after = fields === undefined ? {} : Object.fromEntries(Object.entries(before).filter(([k]) => !fields.includes(k)))
      if (Object.keys(after).length === 0) {
        await o.transport.config.delete(model)
      } else {
        await o.transport.config.put(model, after)
      }
      o.logger.info(
        { audit: 'admin.batching', who, client: o.adapter?.clientAddress?.(c) ?? headerOf(c, 'x-forwarded-for') ?? null, model, reset: fields ?? 'all', before, after },
        'admin: batching override removed',
      )
      return c.json({ model, stored: after })
    },
  }
}
