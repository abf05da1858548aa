// Module load hooks for Cohort's own TypeScript (registered by ./cohort.js after tsx, so they run
// first): the packages' src/**/*.ts compiled by esbuild like tsx does, but without `keepNames`.
// tsx compiles every file with esbuild's keepNames, which wraps each function and class in a
// `__name(fn, "name")` call (an Object.defineProperty on every closure made): names that the
// sources already have, since nothing is minified. On the request path that was 6-8% of `cohort
// serve`'s CPU per request (issue 28; docs/bench/hot-path-6-2026-12-04.md). Every other file
// (users' predictors, anything in node_modules but Cohort's packages) goes on to tsx unchanged.
// Output is cached on disk by content hash, as tsx caches its own: without it each start would
// compile some 260 files again (about 0.5 s).
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Bumped when the options below change, so that cached output is not reused. */
const VERSION = '1'
/** The checkout's root (this file is apps/cli/bin/ts-hooks.mjs) or, installed, node_modules/@cohort. */
const ROOT = new URL('../../../', import.meta.url).href
/** Cohort's own sources: a workspace's src/ in the checkout, or an installed @cohort package's. */
const OWN = /^(?:(?:apps|libs)\/[^/]+\/src\/|bench\/src\/|test\/support\/src\/)/
const INSTALLED = /\/node_modules\/@cohort\/[^/]+\/src\//

let esbuild
try {
  esbuild = await import('esbuild')
} catch {
  esbuild = undefined // tsx compiles everything, as before
}

let cacheDir
try {
  cacheDir = join(tmpdir(), `cohort-ts-${userInfo().uid}`)
  mkdirSync(cacheDir, { recursive: true })
} catch {
  cacheDir = undefined
}

function own(url) {
  if (!url.endsWith('.ts') || url.endsWith('.d.ts')) {
    return false
  }
  if (INSTALLED.test(url)) {
    return true
  }
  return url.startsWith(ROOT) && !url.includes('/node_modules/') && OWN.test(url.slice(ROOT.length))
}

function compile(path, source) {
  const key = cacheDir && createHash('sha256').update(`${VERSION}\0${esbuild.version}\0${path}\0`).update(source).digest('hex')
  const file = key && join(cacheDir, `${key}.mjs`)
  if (file) {
    try {
      return readFileSync(file, 'utf8')
    } catch {
      // not cached yet
    }
  }
  const { code } = esbuild.transformSync(source, {
    loader: 'ts',
    format: 'esm',
    target: `node${process.versions.node}`,
    sourcemap: 'inline',
    sourcefile: path,
    minifyWhitespace: true,
    keepNames: false,
    // The compiler options esbuild reads (tsconfig.json): class fields by define, imports as written.
    tsconfigRaw: { compilerOptions: { target: 'ES2022', useDefineForClassFields: true, verbatimModuleSyntax: true } },
  })
  if (file) {
    try {
      const tmp = `${file}.${process.pid}.tmp`
      writeFileSync(tmp, code)
      renameSync(tmp, file)
    } catch {
      // a read-only or full temp dir: compile again next time
    }
  }
  return code
}

export async function load(url, context, nextLoad) {
  if (esbuild === undefined || !url.startsWith('file:') || !own(url)) {
    return nextLoad(url, context)
  }
  const path = fileURLToPath(url)
  return { format: 'module', source: compile(path, readFileSync(path, 'utf8')), shortCircuit: true }
}
