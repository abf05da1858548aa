import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_REMOTE_CONCURRENCY } from '@cohort/worker'
import { REPOSITORY_HELP, REPOSITORY_POLL_OFF, given, repositoryOptions } from './repository-flags.ts'
import { PIPELINE_HELP } from './pipeline-flags.ts'

describe('--model-repository flags', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-repo-flags-'))

  it('passes the folder, the poll interval and only the model flags really given', () => {
    expect(repositoryOptions({ 'model-repository': dir }, {})).toEqual({ dir, flags: {} })
    expect(repositoryOptions({ 'model-repository': dir, 'repository-poll-ms': '500' }, { ep: 'cpu', instances: 2, threads: 3, processes: true })).toEqual({
      dir,
      pollMs: 500,
      flags: { ep: 'cpu', instances: 2, threads: 3, processes: true },
    })
    expect(repositoryOptions({}, {})).toBeUndefined()
  })

  it('refuses a poll interval without a repository, a missing folder, a file and a bad interval', () => {
    expect(() => repositoryOptions({ 'repository-poll-ms': '100' }, {})).toThrow(/--repository-poll-ms needs --model-repository DIR/)
    expect(() => repositoryOptions({ 'model-repository': join(dir, 'nope') }, {})).toThrow(/is not a folder/)
    const file = join(dir, 'f')
    writeFileSync(file, 'x')
    expect(() => repositoryOptions({ 'model-repository': file }, {})).toThrow(/is not a folder/)
    expect(() => repositoryOptions({ 'model-repository': dir, 'repository-poll-ms': 'soon' }, {})).toThrow(/--repository-poll-ms must be an integer >= 0/)
  })

  it('tells a given flag from its default', () => {
    expect(given(['--ep', 'cuda'], 'ep')).toBe(true)
    expect(given(['--ep=cuda'], 'ep')).toBe(true)
    expect(given(['--epx', 'cuda'], 'ep')).toBe(false)
    expect(given([], 'ep')).toBe(false)
  })
})

describe('repository and pipeline knob tables', () => {
  it('help defaults are the constants; bad values name the flag', () => {
    expect(REPOSITORY_HELP).toContain(`(default ${REPOSITORY_POLL_OFF}: off;`)
    expect(PIPELINE_HELP).toContain(`(default ${DEFAULT_REMOTE_CONCURRENCY})`)
    expect(() => repositoryOptions({ 'model-repository': '.', 'repository-poll-ms': '1.5' }, {})).toThrow(/--repository-poll-ms must be an integer >= 0/)
  })
})
