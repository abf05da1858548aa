#!/usr/bin/env node
// What a published workspace's tarball gets beyond its sources: `node scripts/prepack.mjs [DIR...]`
// (default: the current directory; each package's `prepack` runs it, so `npm pack` and `npm publish`
// ship them, and `postpack` runs `--clean`), or `--all` for every published workspace in one tsc run.
// - DIR/dist/**/*.d.ts from DIR/src (tests left out) with the repository's compiler options;
// - DIR/LICENSE, a copy of the repository's LICENSE (Apache-2.0, the `license` of every package).
// Why only types: the packages run from their `.ts` sources through tsx (the `cohort` command
// registers it), but a user's own `tsc` should not type-check this repository's sources under
// the user's settings (`allowImportingTsExtensions`, strictness flags). `exports` sends the `types`
// condition to dist/ and everything else to src/; inside the checkout the `cohort-source`
// condition (tsconfig.json `customConditions`) keeps the editor and `tsc` on the sources, so no
// build is needed to develop. See docs/packages.md.
import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const ROOT = resolve(import.meta.dirname, '..')
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc')

/** The workspaces that are published: libs/* and apps/* without `"private": true`. */
export function publishedDirs() {
  const out = []
  for (const group of ['libs', 'apps']) {
    for (const d of readdirSync(join(ROOT, group)).sort()) {
      const pj = join(ROOT, group, d, 'package.json')
      if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).private !== true) {
        out.push(join(ROOT, group, d))
      }
    }
  }
  return out
}

/** One tsc program over the packages' sources (tests left out), declarations only, into outDir. */
function emit(dirs, rootDir, outDir, extendsFrom) {
  const tmp = mkdtempSync(join(tmpdir(), 'cohort-types-'))
  const config = join(tmp, 'tsconfig.json')
  writeFileSync(
    config,
    JSON.stringify({
      extends: extendsFrom,
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        noEmitOnError: true,
        rootDir,
        outDir,
        typeRoots: [join(ROOT, 'node_modules/@types')],
        // The workspaces' own sources, not the dist/ of a sibling that may not be built yet.
        customConditions: ['cohort-source'],
      },
      include: dirs.map((d) => join(d, 'src/**/*.ts')),
      exclude: dirs.flatMap((d) => [join(d, 'src/**/*.test.ts'), join(d, 'src/**/*.property.*'), join(d, 'src/**/dashboard-client/**')]),
    }),
  )
  try {
    execFileSync(process.execPath, [TSC, '-p', config], { stdio: 'inherit' })
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** DIR/dist from DIR/src and DIR/LICENSE for one package (its `prepack`). */
export function prepack(dir) {
  const pkg = resolve(dir)
  const lib = join(pkg, 'tsconfig.lib.json')
  rmSync(join(pkg, 'dist'), { recursive: true, force: true })
  emit([pkg], join(pkg, 'src'), join(pkg, 'dist'), existsSync(lib) ? lib : join(ROOT, 'tsconfig.json'))
  copyFileSync(join(ROOT, 'LICENSE'), join(pkg, 'LICENSE'))
}

/** `postpack`: dist/ and LICENSE exist only for the tarball (nothing in the checkout reads them). */
export function clean(dir) {
  const pkg = resolve(dir)
  rmSync(join(pkg, 'dist'), { recursive: true, force: true })
  rmSync(join(pkg, 'LICENSE'), { force: true })
}

/** Every published package's dist/ (in one tsc run) and LICENSE: what test/packaging does before packing. */
export function prepackAll() {
  const dirs = publishedDirs()
  const tmp = mkdtempSync(join(tmpdir(), 'cohort-types-out-'))
  try {
    emit(dirs, ROOT, tmp, join(ROOT, 'tsconfig.json'))
    for (const d of dirs) {
      rmSync(join(d, 'dist'), { recursive: true, force: true })
      cpSync(join(tmp, relative(ROOT, d), 'src'), join(d, 'dist'), { recursive: true })
      copyFileSync(join(ROOT, 'LICENSE'), join(d, 'LICENSE'))
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2)
  if (args[0] === '--all') {
    prepackAll()
  } else if (args[0] === '--clean') {
    for (const d of args.length > 1 ? args.slice(1) : ['.']) {
      clean(d)
    }
  } else {
    for (const d of args.length > 0 ? args : ['.']) {
      prepack(d)
    }
  }
}
