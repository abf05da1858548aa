#!/usr/bin/env node
// Import cycles across workspaces (`npm run lint:cycles`): madge finds the cycles inside the
// folders it is given, but resolves `@cohort/*` through node_modules, which it does not follow, so a
// cycle that leaves one workspace and comes back (libs/a -> @cohort/b -> @cohort/a) was invisible.
// This follows them: (1) the workspace graph from each package.json's `dependencies` must have no
// cycle; (2) the file graph of every product file (tests left out), with `@cohort/*` and its
// subpaths resolved to the files their `exports` name and relative imports to their files, must
// have no cycle of runtime imports (`import type` / `export type` erase at compile time and are
// left out, as are dynamic `import()`s, which run later). Exits 1 printing each cycle.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const ROOT = new URL('..', import.meta.url).pathname
const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
const dirs = root.workspaces.flatMap((w) => (w.endsWith('/*') ? readdirSync(join(ROOT, w.slice(0, -2))).map((d) => join(w.slice(0, -2), d)) : [w]))
const pkgs = new Map() // name -> { dir, pkg }
for (const d of dirs) {
  const f = join(ROOT, d, 'package.json')
  if (!existsSync(f)) continue
  const pkg = JSON.parse(readFileSync(f, 'utf8'))
  pkgs.set(pkg.name, { dir: join(ROOT, d), pkg })
}

/** Strongly connected components of size > 1 (or self-loops): Tarjan. */
function cycles(graph) {
  let index = 0
  const idx = new Map()
  const low = new Map()
  const stack = []
  const on = new Set()
  const out = []
  const visit = (v) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (on.has(w)) {
        low.set(v, Math.min(low.get(v), idx.get(w)))
      }
    }
    if (low.get(v) === idx.get(v)) {
      const scc = []
      let w
      do {
        w = stack.pop()
        on.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1 || (graph.get(v) ?? new Set()).has(v)) out.push(scc.reverse())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) visit(v)
  return out
}

// (1) Workspaces.
const wsGraph = new Map([...pkgs].map(([name, { pkg }]) => [name, new Set(Object.keys(pkg.dependencies ?? {}).filter((d) => pkgs.has(d)))]))

// (2) Files.
const IMPORT = /^\s*(import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm

function* sources(dir) {
  for (const e of readdirSync(dir)) {
    if (e === 'node_modules' || e === 'dist' || e.startsWith('.')) continue
    const p = join(dir, e)
    if (statSync(p).isDirectory()) yield* sources(p)
    else if (/\.(ts|mts|js|mjs)$/.test(e) && !/\.(test|fuzz\.test|property\.test)\.ts$/.test(e) && !e.endsWith('.d.ts')) yield p
  }
}

/** The file an `exports` entry names for `@cohort/x[/sub]`, or undefined. */
function entryOf(spec) {
  const parts = spec.split('/')
  const p = pkgs.get(parts.slice(0, 2).join('/'))
  if (!p) return undefined
  const key = parts.length > 2 ? `./${parts.slice(2).join('/')}` : '.'
  const exp = p.pkg.exports?.[key] ?? (key === '.' ? p.pkg.main : undefined)
  const target = typeof exp === 'string' ? exp : (exp?.['cohort-source'] ?? exp?.default ?? exp?.import)
  return typeof target === 'string' ? resolve(p.dir, target) : undefined
}

function resolveRelative(from, spec) {
  const base = resolve(dirname(from), spec)
  for (const c of [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(c) && statSync(c).isFile()) return c
  }
  return undefined
}

const fileGraph = new Map()
for (const { dir } of pkgs.values()) {
  for (const f of sources(dir)) {
    const edges = new Set()
    for (const m of readFileSync(f, 'utf8').matchAll(IMPORT)) {
      if (m[2]) continue // import type / export type
      const spec = m[3]
      const to = spec.startsWith('.') ? resolveRelative(f, spec) : spec.startsWith('@cohort/') ? entryOf(spec) : undefined
      if (to) edges.add(to)
    }
    fileGraph.set(f, edges)
  }
}

let bad = 0
for (const c of cycles(wsGraph)) {
  bad++
  console.error(`workspace cycle: ${[...c, c[0]].join(' -> ')}`)
}
for (const c of cycles(fileGraph)) {
  const names = c.map((f) => relative(ROOT, f))
  const ws = new Set(names.map((n) => n.split('/').slice(0, 2).join('/')))
  bad++
  console.error(`import cycle${ws.size > 1 ? ' across workspaces' : ''} (${c.length} files): ${names.join(' -> ')} -> ${names[0]}`)
}
if (bad > 0) {
  console.error(`${bad} cycle(s)`)
  process.exit(1)
}
console.log(`no cycle: ${pkgs.size} workspaces, ${fileGraph.size} product files (@cohort/* followed across workspaces)`)
