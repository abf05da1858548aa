// The generative APIs embedded: `cohort serve` (gateway and worker in one process, in-process transport).
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnCohort } from '@cohort/test-support'
import { CHAR_GENERATOR, defineGenerativeSuite } from './generative-suite.ts'

defineGenerativeSuite('generative APIs, embedded (cohort serve)', async () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'cohort-gen-'))
  const p = spawnCohort(['serve', '--port', '0', '--threads', '1', '--generative', `chars=${CHAR_GENERATOR}`, '--model', 'demo'], {
    CHARGEN_STATE: join(stateDir, 'serve.json'),
  })
  const [, port] = await p.waitFor(/on http:\/\/127\.0\.0\.1:(\d+)/, 90_000)
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    stateDir,
    metricsUrls: [`http://127.0.0.1:${port}/metrics`],
    close: async () => {
      await p.stop('SIGKILL')
    },
  }
})
