#!/usr/bin/env node
// `node scripts/sbom.mjs OUT.json`: a CycloneDX SBOM of what is installed in ./node_modules, for the
// images (scripts/prod-install.sh runs it after pruning). It is npm's own SBOM of the lockfile
// (`npm sbom --package-lock-only --sbom-format=cyclonedx`) cut down to the packages on disk: after
// `npm ci --omit=dev`, `npm sbom --omit=dev` fails on the absent dev dependencies (ESBOMPROBLEMS),
// and with --package-lock-only it leaves out runtime packages that a workspace also lists as dev
// (onnxruntime-node, tsx: npm 11.19).
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'

const out = process.argv[2]
if (!out) {
  console.error('usage: node scripts/sbom.mjs OUT.json')
  process.exit(2)
}
const hidden = JSON.parse(readFileSync('node_modules/.package-lock.json', 'utf8')).packages
const installed = new Set()
for (const [path, p] of Object.entries(hidden)) {
  if (p.link || !existsSync(join(path, 'package.json'))) {
    continue
  }
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(path)
  installed.add(`${p.name ?? (m ? m[1] : basename(path))}@${p.version}`)
}
const bom = JSON.parse(execFileSync('npm', ['sbom', '--package-lock-only', '--sbom-format=cyclonedx'], { encoding: 'utf8', maxBuffer: 64 << 20 }))
bom.components = bom.components.filter((c) => installed.has(c['bom-ref']))
const refs = new Set([bom.metadata?.component?.['bom-ref'], ...bom.components.map((c) => c['bom-ref'])])
bom.dependencies = (bom.dependencies ?? []).filter((d) => refs.has(d.ref)).map((d) => ({ ...d, dependsOn: (d.dependsOn ?? []).filter((r) => refs.has(r)) }))
writeFileSync(out, `${JSON.stringify(bom, null, 2)}\n`)
console.log(`sbom: ${bom.components.length} components in ${out}`)
