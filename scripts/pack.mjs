#!/usr/bin/env node
// `node scripts/pack.mjs [DEST]` (default ./packs): the tarballs of every published workspace
// (libs/*, apps/* without "private": true) in one go: the declaration files and licence copies of all
// of them in one tsc run (scripts/prepack.mjs --all, what each package's prepack does), then one
// `npm pack --workspace A --workspace B ...` without the per-package scripts, then the clean-up
// (scripts/prepack.mjs --clean). One npm process instead of one per package (13): docs/packages.md.
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { publishedDirs } from './prepack.mjs'

const ROOT = resolve(import.meta.dirname, '..')
const dest = resolve(process.argv[2] ?? 'packs')
mkdirSync(dest, { recursive: true })
const dirs = publishedDirs()
const prepack = join(ROOT, 'scripts/prepack.mjs')
execFileSync(process.execPath, [prepack, '--all'], { stdio: 'inherit' })
try {
  const ws = dirs.flatMap((d) => ['--workspace', relative(ROOT, d)])
  execFileSync('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dest, ...ws], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] })
} finally {
  execFileSync(process.execPath, [prepack, '--clean', ...dirs], { stdio: 'inherit' })
}
const packed = readdirSync(dest).filter((f) => f.endsWith('.tgz'))
console.log(`pack: ${packed.length} tarballs in ${dest}`)
