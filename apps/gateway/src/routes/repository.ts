import type { Context, Hono } from 'hono'
import { CohortError, decodeValue, encodeValue, type RepositoryAnswer, type RepositoryEntry } from '@cohort/protocol'
import { bodyOf, parseJson } from '../body.ts'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { requireAdmin } from './admin.ts'
import { checkModelPath } from './infer.ts'
import { headerOf } from '../request-header.ts'

/** How long the gateway collects the workers' answers to one repository request, ms. */
export const REPOSITORY_ANSWER_MS = 300
/** How long a load or unload may take on the workers before the gateway answers with what it sees, ms. */
export const REPOSITORY_CHANGE_MS = 120_000

/** Ask every worker holding a repository; the readable answers. */
async function ask(up: Upstream, op: 'index' | 'load' | 'unload', model?: string): Promise<RepositoryAnswer[]> {
  const raw = await up.transport.requestAll(up.subjects.repository(op), model === undefined ? new Uint8Array(0) : encodeValue({ model }), {
    timeoutMs: Math.min(up.metaTimeoutMs, REPOSITORY_ANSWER_MS),
  })
  const out: RepositoryAnswer[] = []
  for (const r of raw) {
    try {
      const v = decodeValue(r) as RepositoryAnswer | null
      if (typeof v?.worker === 'string' && Array.isArray(v.models)) {
        out.push({
          worker: v.worker,
          models: v.models.filter(isEntry),
          busy: Array.isArray(v.busy) ? v.busy.filter((b) => typeof b === 'string') : [],
          ...(typeof v.error === 'string' ? { error: v.error } : {}),
        })
      }
    } catch {
      // One unreadable worker must not hide the others.
    }
  }
  return out
}

function isEntry(e: unknown): e is RepositoryEntry {
  const x = e as { name?: unknown; version?: unknown; state?: unknown } | null
  return typeof x?.name === 'string' && typeof x.version === 'string' && (x.state === 'READY' || x.state === 'UNAVAILABLE' || x.state === 'LOADING')
}

/**
 * Merge the workers' indexes (Triton's repository index) per version, over the workers that list
 * it: READY only when every one of them serves it; otherwise LOADING when any is loading it, else
 * UNAVAILABLE. The reason of a version some workers serve and others do not names which
 * (`ready on w1 only; w2 UNAVAILABLE: <its reason>`); of one no worker serves, each distinct reason.
 * A worker that is gone stops answering, so the merge covers the workers there now.
 */
export function mergeIndex(answers: readonly RepositoryAnswer[]): RepositoryEntry[] {
  const byKey = new Map<string, { name: string; version: string; per: { worker: string; e: RepositoryEntry }[] }>()
  for (const a of answers) {
    for (const e of a.models) {
      const key = `${e.name}\n${e.version}`
      let g = byKey.get(key)
      if (!g) {
        g = { name: e.name, version: e.version, per: [] }
        byKey.set(key, g)
      }
      g.per.push({ worker: a.worker, e })
    }
  }
  const num = (v: string) => (v.length > 15 ? Number.MAX_SAFE_INTEGER : Number(v))
  return [...byKey.values()]
    .map(({ name, version, per }): RepositoryEntry => {
      const ready = per.filter((p) => p.e.state === 'READY')
      if (ready.length === per.length) {
        return { name, version, state: 'READY' }
      }
      const rest = per.filter((p) => p.e.state !== 'READY')
      const state = rest.some((p) => p.e.state === 'LOADING') ? 'LOADING' : 'UNAVAILABLE'
      const reason =
        ready.length > 0
          ? [`ready on ${ready.map((p) => p.worker).join(', ')} only`, ...rest.map((p) => `${p.worker} ${p.e.state}${p.e.reason ? `: ${p.e.reason}` : ''}`)].join('; ')
          : [...new Set(rest.filter((p) => p.e.state === state && p.e.reason).map((p) => p.e.reason as string))].join('; ')
      return { name, version, state, ...(reason ? { reason } : {}) }
    })
    .sort((a, b) => a.name.localeCompare(b.name) || num(a.version) - num(b.version))
}

/**
 * Wait until no worker that took the change still has the model busy (or the time is up); the
 * merged index of the model, and the workers that took the change but no longer answer (`lost`:
 * killed, cut off or shut down meanwhile; the merge covers the others).
 */
async function settled(
  up: Upstream,
  model: string,
  workers: ReadonlySet<string>,
  limitMs: number,
): Promise<{ entries: RepositoryEntry[]; servedSomewhere: boolean; lost: string[] }> {
  const until = Date.now() + limitMs
  for (;;) {
    const answers = (await ask(up, 'index')).filter((a) => workers.has(a.worker))
    const busy = answers.some((a) => a.busy.includes(model)) || answers.some((a) => a.models.some((e) => e.name === model && e.state === 'LOADING'))
    if (!busy || Date.now() >= until) {
      const answered = new Set(answers.map((a) => a.worker))
      return {
        entries: mergeIndex(answers).filter((e) => e.name === model),
        servedSomewhere: answers.some((a) => a.models.some((e) => e.name === model && e.state === 'READY')),
        lost: [...workers].filter((w) => !answered.has(w)).sort(),
      }
    }
  }
}

/**
 * Triton's model repository extension behind the admin keys (docs/repository.md#load-and-unload):
 * `GET|POST /v2/repository/index`, `POST /v2/repository/models/{m}/load` and `/unload`, sent to
 * every worker holding a repository over NATS.
 */
export function registerRepository(app: Hono, o: ResolvedGatewayOptions & { adminKeys?: readonly string[] }, up: Upstream): void {
  const index = async (c: Context) => {
    requireAdmin(c, o.adminKeys)
    let readyOnly = false
    if (c.req.method === 'POST') {
      const text = await bodyOf(c, o, 64 * 1024)
      const body = text.byteLength === 0 ? {} : parseJson(text)
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw new CohortError('BAD_REQUEST', 'the index request body must be a JSON object, e.g. {"ready": true}')
      }
      const r = (body as { ready?: unknown }).ready
      if (r !== undefined && typeof r !== 'boolean') {
        throw new CohortError('BAD_REQUEST', `"ready" must be true or false, got ${JSON.stringify(r)}`)
      }
      readyOnly = r === true
    }
    const merged = mergeIndex(await ask(up, 'index'))
    return c.json(readyOnly ? merged.filter((e) => e.state === 'READY') : merged)
  }
  app.get('/v2/repository/index', index)
  app.post('/v2/repository/index', index)

  const change = (op: 'load' | 'unload') => async (c: Context) => {
    const who = requireAdmin(c, o.adminKeys)
    const model = c.req.param('model') ?? ''
    checkModelPath(model, undefined)
    const answers = await ask(up, op, model)
    if (answers.length === 0) {
      throw new CohortError('NO_WORKER', 'no worker holding a model repository answered (start workers with --model-repository DIR)', { retryAfterS: 1 })
    }
    const took = answers.filter((a) => a.error === undefined)
    if (took.length === 0) {
      throw new CohortError('MODEL_NOT_FOUND', [...new Set(answers.map((a) => a.error))].join('; '))
    }
    o.logger.info(
      { audit: `admin.repository.${op}`, who, client: o.adapter?.clientAddress?.(c) ?? headerOf(c, 'x-forwarded-for') ?? null, model, workers: took.map((a) => a.worker) },
      `admin: repository ${op}`,
    )
    const { entries, servedSomewhere, lost } = await settled(up, model, new Set(took.map((a) => a.worker)), REPOSITORY_CHANGE_MS)
    if (op === 'load' && !servedSomewhere && lost.length > 0 && lost.length === took.length) {
      throw new CohortError('WORKER_LOST', `every worker that took the load of "${model}" (${lost.join(', ')}) stopped answering before it finished`, { retryAfterS: 1 })
    }
    // A version served by some workers only answers 200: its entry says which do not serve it, and
    // `lost` names the workers that took the change and stopped answering before it finished.
    if (op === 'load' && !servedSomewhere) {
      const why = [...new Set(entries.map((e) => e.reason).filter((r): r is string => r !== undefined))].join('; ')
      throw new CohortError('MODEL_LOAD_FAILED', `no version of model "${model}" loaded${why ? `: ${why}` : ''}`)
    }
    return c.json({ model, workers: took.length, ...(lost.length > 0 ? { lost } : {}), versions: entries })
  }
  app.post('/v2/repository/models/:model/load', change('load'))
  app.post('/v2/repository/models/:model/unload', change('unload'))
}
