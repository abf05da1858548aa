#!/usr/bin/env -S node --max-semi-space-size=32
// The node flags above are the command's (docs/architecture.md#the-node-process): a young generation
// of up to 32 MB per semi-space (V8's default: 16), so the objects of the requests in flight mostly
// die before a scavenge copies them (docs/bench/young-gen-2026-12-06.md). Running
// `node apps/cli/bin/cohort.js` yourself, pass them too; `npm start` executes this file.
// Entry of the `cohort` command: TypeScript runs through tsx, no build step. Both hooks: the ESM
// one for the packages and for user files in a "type": "module" folder, the CommonJS one for a
// user's .ts file in any other folder (npm init's default), which tsx compiles to CommonJS.
import { register } from 'tsx/esm/api'
import { register as registerCommonJs } from 'tsx/cjs/api'
import { register as registerHooks } from 'node:module'

register()
registerCommonJs()
// Cohort's own sources without tsx's keepNames (ts-hooks.mjs says why); registered last, run first.
registerHooks('./ts-hooks.mjs', import.meta.url)
await import('../src/main.ts')
