#!/usr/bin/env node
// Rewrites each `export * from './x.ts'` of the given entry files as an explicit list of what that
// module exports (`export { a, b, type C } from './x.ts'`), values and types named apart, sorted:
//   node scripts/explicit-exports.mjs libs/*/src/index.ts
// The public API is then read in one place and a new export is a visible change to the entry
// (apps/gateway/src/index.test.ts checks that no entry re-exports a module whole).
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import ts from 'typescript'

const files = process.argv.slice(2)
const program = ts.createProgram(
  files.map((f) => resolve(f)),
  {
    allowImportingTsExtensions: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
  },
)
const checker = program.getTypeChecker()
const STAR = /^export \* from '([^']+)'\s*$/gm

for (const f of files) {
  const text = readFileSync(f, 'utf8')
  const out = text.replace(STAR, (_line, spec) => {
    const target = program.getSourceFile(resolve(dirname(resolve(f)), spec))
    const sym = target && checker.getSymbolAtLocation(target)
    if (!sym) throw new Error(`${f}: cannot read ${spec}`)
    const names = checker.getExportsOfModule(sym).map((s) => {
      const real = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s
      const value = (real.flags & ts.SymbolFlags.Value) !== 0
      return { name: s.getName(), value }
    })
    names.sort((a, b) => a.name.localeCompare(b.name))
    const list = names.map((n) => (n.value ? n.name : `type ${n.name}`))
    const one = `export { ${list.join(', ')} } from '${spec}'`
    return one.length <= 140 ? one : `export {\n${list.map((n) => `  ${n},`).join('\n')}\n} from '${spec}'`
  })
  if (out !== text) {
    writeFileSync(f, out)
    console.log(`${f}: explicit`)
  }
}
