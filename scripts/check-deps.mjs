#!/usr/bin/env node
// Declared boundaries (`npm run lint:deps`): every workspace's package.json lists each package its
// files import (`@cohort/*` included): `dependencies` for what its product files import,
// `devDependencies` for what only its tests (*.test.ts, *.property.*) and the files its package
// leaves out (dev tools) import. Exits 1 naming each miss.
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

const ROOT = new URL('..', import.meta.url).pathname
const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
const dirs = root.workspaces.flatMap((w) => (w.endsWith('/*') ? readdirSync(join(ROOT, w.slice(0, -2))).map((d) => join(w.slice(0, -2), d)) : [w]))
const IMPORT = /(?:^|\s)(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm

function* files(dir) {
  for (const e of readdirSync(dir)) {
    if (e === 'node_modules' || e === 'dist' || e.startsWith('.')) continue
    const p = join(dir, e)
    if (statSync(p).isDirectory()) yield* files(p)
    else if (/\.(ts|js|mjs|cjs)$/.test(e)) yield p
  }
}

// A `files` glob (src/**/*.test.ts, or an exact path) as a RegExp over a path relative to the package.
function globRegExp(g) {
  const re = g
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*\*\//g, '\u0000')
    .replace(/\*/g, '[^/]*')
    .replace(/\u0000/g, '(?:.*/)?')
  return new RegExp(`^${re}$`)
}

let misses = 0
for (const d of dirs) {
  const pkg = JSON.parse(readFileSync(join(ROOT, d, 'package.json'), 'utf8'))
  // A file the package's `files` leaves out (`"!src/routes/dashboard-build.ts"`) is never installed:
  // a dev tool, whose imports are devDependencies.
  const negations = (pkg.files ?? []).filter((g) => g.startsWith('!')).map((g) => globRegExp(g.slice(1)))
  const unshipped = (f) => negations.some((r) => r.test(relative(join(ROOT, d), f)))
  const prod = new Set()
  const dev = new Set()
  for (const f of files(join(ROOT, d))) {
    const isDev = f.endsWith('.test.ts') || f.includes('.property.') || unshipped(f)
    for (const m of readFileSync(f, 'utf8').matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3]
      if (/^(\.|\/|node:)/.test(spec)) continue
      const parts = spec.split('/')
      const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
      if (name !== pkg.name) (isDev ? dev : prod).add(name)
    }
  }
  for (const name of prod) dev.delete(name)
  for (const [field, want] of [
    ['dependencies', prod],
    ['devDependencies', dev],
  ]) {
    for (const name of want) {
      const declared = field === 'dependencies' ? pkg.dependencies : { ...pkg.dependencies, ...pkg.devDependencies }
      if (!declared?.[name]) {
        console.error(`${d}/package.json: ${field} misses ${name}`)
        misses++
      }
    }
  }
}
if (misses > 0) process.exit(1)
console.log(`check-deps: ${dirs.length} workspaces declare what they import`)
