// The globalSetup of every vitest project (vitest.config.ts): a run dir whose path marks the
// project's processes (@cohort/test-support's process-guard.ts), and after the last test the check that
// none of them is still alive; a straggler is killed and fails the run.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import { reapStragglers } from '../support/src/process-guard.ts'

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run dir of this project's test run (process-guard.ts). */
    cohortRunDir: string
  }
}

export default function setup(project: TestProject): () => Promise<void> {
  const runDir = mkdtempSync(join(tmpdir(), `cohort-run-${project.name}-`))
  project.provide('cohortRunDir', runDir)
  return async () => {
    const left = await reapStragglers(runDir)
    rmSync(runDir, { recursive: true, force: true })
    if (left.length > 0) {
      const list = left.map((p) => `  pid ${p.pid} (parent ${p.ppid}): ${p.cmdline}`).join('\n')
      const msg = `${left.length} process(es) started by the ${project.name} tests outlived them (killed now):\n${list}`
      process.exitCode = 1
      throw new Error(msg)
    }
  }
}
