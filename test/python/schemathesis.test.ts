// schemathesis (PyPI, unmodified) against a live `cohort serve` of the README's `shout` predictor:
// its stateless phases (examples, coverage, fuzzing) generate requests from GET /openapi.json and
// check every answer against the document. Needs test/python/.venv-schemathesis (setup.sh).
import { execFile } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, type CliProcess, ifStarted } from '@cohort/test-support'
import { PY_DIR, ensureVenv } from './harness.ts'

const SHOUT = fileURLToPath(new URL('../fixtures/shout-predictor.ts', import.meta.url))
const SCHEMATHESIS = join(PY_DIR, '.venv-schemathesis', 'bin', 'schemathesis')

// Every response check except two that test a choice this gateway makes on purpose: for a method a
// path does not declare (TRACE /health-check) it answers 404 NOT_FOUND "no route <METHOD> <path>"
// (docs/errors.md), not 405, so unsupported_method and allow_header_conformance (the Allow header
// of a 405) do not apply.
const CHECKS = ['--checks', 'all', '--exclude-checks', 'unsupported_method,allow_header_conformance']

function schemathesis(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    // In a temp dir: schemathesis writes its crash cache (.schemathesis/) under the working directory.
    execFile(
      SCHEMATHESIS,
      args,
      { cwd: mkdtempSync(join(tmpdir(), 'cohort-st-')), timeout: 150_000, maxBuffer: 16 << 20, env: { ...process.env, NO_COLOR: '1' } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0
        resolve({ code, out: `${stdout}\n${stderr}` })
      },
    )
  })
}

describe('schemathesis against /openapi.json', () => {
  let p: CliProcess
  let url: string

  beforeAll(async () => {
    await ensureVenv()
    p = spawnCohort(['serve', '--port', '0', '--predictor', SHOUT])
    url = (await p.waitFor(/serving .* on (http:\/\/\S+)/, 90_000))[1]!
  })

  afterAll(async () => {
    await ifStarted(p)?.stop('SIGKILL')
  })

  it('stateless checks (server errors, status codes, content types, response schemas, positive and negative data) pass on every operation', async () => {
    const { code, out } = await schemathesis([
      'run',
      `${url}/openapi.json`,
      ...CHECKS,
      '--phases',
      'examples,coverage,fuzzing',
      // Bounded: a few examples per operation, no shrinking, one worker (the CPUs are shared).
      '--max-examples',
      '10',
      '--no-shrink',
      '--workers',
      '1',
      '--seed',
      '1',
      '--generation-database',
      'none',
      '--request-timeout',
      '20',
    ])
    expect(out).toMatch(/Operations:\s+5 selected \/ 5 total/)
    expect({ code, failures: code === 0 ? '' : out.slice(out.indexOf('FAILURES')) }).toEqual({ code: 0, failures: '' })
    expect(out).toMatch(/Tested: 5/)
    expect(out).toMatch(/(\d+) generated/)
  }, 180_000)
})
