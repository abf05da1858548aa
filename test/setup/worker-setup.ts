// A setupFile of every vitest project (vitest.config.ts): marks this test worker's environment, so
// that every process its tests start carries the run's mark (@cohort/test-support's process-guard.ts).
// Set here, in the worker, so the worker itself (whose /proc environ is fixed at its start) is not
// counted.
import { inject } from 'vitest'
import { RUN_MARK } from '../support/src/process-guard.ts'

process.env[RUN_MARK] = inject('cohortRunDir')
