// No workspace re-exports a module whole (`export * from`): each package entry lists its public API
// by name, so what is internal stays internal and a new export is a visible change
// (scripts/explicit-exports.mjs writes an entry's list from its modules).
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** Entries still on `export *`: `node scripts/explicit-exports.mjs <these>` makes them explicit. */
const PENDING = new Set<string>([])

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.')
      ? []
      : e.isDirectory()
        ? sources(join(dir, e.name))
        : /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.test.ts')
          ? [join(dir, e.name)]
          : [],
  )
}

describe('explicit exports', () => {
  it('no `export *` in any workspace but the pending entries', () => {
    const whole = ['libs', 'apps', 'bench', 'test/support', 'examples']
      .flatMap((d) => sources(join(ROOT, d)))
      .filter((f) => /^export \* from /m.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f))
    expect(whole.filter((f) => !PENDING.has(f))).toEqual([])
    // A pending entry made explicit leaves the list (so the list only shrinks).
    expect([...PENDING].filter((f) => !whole.includes(f))).toEqual([])
  })
})
