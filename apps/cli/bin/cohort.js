#!/usr/bin/env node
// Entry of the `cohort` command: TypeScript runs through tsx, no build step.
import { register } from 'tsx/esm/api'

register()
await import('../src/main.ts')
