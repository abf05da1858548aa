#!/usr/bin/env node
// Entry of the benchmarks (`npm run bench -- ...`, or `cohort bench ...` in a source checkout).
import { register } from 'tsx/esm/api'
import { register as registerHooks } from 'node:module'

register()
// Cohort's own sources as `cohort` compiles them (apps/cli/bin/ts-hooks.mjs).
registerHooks('../../apps/cli/bin/ts-hooks.mjs', import.meta.url)
const { benchCommand } = await import('../src/command.ts')
try {
  await benchCommand(process.argv.slice(2))
} catch (e) {
  console.error(`cohort bench: ${e instanceof Error ? e.message : String(e)}`)
  if (process.env['COHORT_DEBUG']) {
    console.error(e)
  }
  process.exit(1)
}
