// The `cohort` command's node flags (bin/cohort.js's shebang, docs/architecture.md#the-node-process):
// executing the entry, `npm start` and the tests' and benches' spawns all give them to node.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { COHORT_BIN, cohortNodeFlags, spawnCohort, spawnProcess, type CliProcess } from '@cohort/test-support'

/** The arguments node was started with (`/proc/<pid>/cmdline`), once `p` serves. */
async function argvOf(p: CliProcess): Promise<string[]> {
  try {
    await p.waitFor(/listening|serving|on http:\/\//, 60_000)
    return readFileSync(`/proc/${String(p.proc.pid)}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '')
  } finally {
    await p.stop()
  }
}

describe.runIf(process.platform === 'linux')('the cohort command’s node flags', () => {
  it('are read from the entry’s shebang and include the young-generation size', () => {
    expect(readFileSync(COHORT_BIN, 'utf8').split('\n', 1)[0]).toMatch(/^#!\/usr\/bin\/env -S node /)
    expect(cohortNodeFlags()).toContain('--max-semi-space-size=32')
  })

  it('reach node when the entry is executed itself (env -S), as npx cohort and npm start run it', async () => {
    const p = spawnProcess(COHORT_BIN, ['serve', '--port', '0'], { label: 'cohort serve (bin)' })
    const argv = await argvOf(p)
    expect(argv.slice(1, 1 + cohortNodeFlags().length)).toEqual(cohortNodeFlags())
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }
    expect(pkg.scripts['start']).toBe('exec apps/cli/bin/cohort.js serve')
  })

  it('reach node in the processes the tests and benches spawn (spawnCohort)', async () => {
    const argv = await argvOf(spawnCohort(['serve', '--port', '0']))
    for (const f of cohortNodeFlags()) {
      expect(argv).toContain(f)
    }
  })
})
