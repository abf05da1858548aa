// The model repository's HTTP API as the repository e2e tests call it: the index, load/unload, and
// polling until a condition holds (polling and loads reach the workers asynchronously).
import { expect } from 'vitest'

/** One row of `GET /v2/repository/index`. */
export interface Entry {
  name: string
  version: string
  state: string
  reason?: string
}

/** `entry(es, name, version)`: the row of that version, if listed. */
export const entry = (es: Entry[], name: string, version: string) => es.find((e) => e.name === name && e.version === version)

/** Poll `fn` every 150 ms until `ok` holds or `timeoutMs` passed; the last value either way. */
export async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs
  let v = await fn()
  while (!ok(v) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 150))
    v = await fn()
  }
  return v
}

/** The repository routes of the gateway at `base()` (read at each call), with the admin key `key`. */
export function repositoryApi(base: () => string, key: string) {
  const auth = { authorization: `Bearer ${key}` }
  return {
    index: async (): Promise<Entry[]> => {
      const r = await fetch(`${base()}/v2/repository/index`, { headers: auth })
      expect(r.status).toBe(200)
      return (await r.json()) as Entry[]
    },
    repoOp: async (op: 'load' | 'unload', name: string): Promise<{ status: number; body: { versions?: Entry[]; code?: string; error?: string } }> => {
      const r = await fetch(`${base()}/v2/repository/models/${name}/${op}`, { method: 'POST', headers: auth })
      return { status: r.status, body: (await r.json()) as { versions?: Entry[]; code?: string; error?: string } }
    },
  }
}
