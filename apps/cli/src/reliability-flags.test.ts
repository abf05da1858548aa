// The reliability knobs reach their options: records' TTL and size (the job queue), the result
// store retry (the worker's jobs), the worker probes (the gateway's worker-loss options) and links
// out of the repository; each command parses and lists them; defaults are the documented ones.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_RECORD_MAX_BYTES, DEFAULT_RECORD_TTL_MS, type JobQueue } from '@cohort/transport'
import { DEFAULT_STORE_RETRY_MS } from '@cohort/worker'
import { parse } from './args.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS, WORKER_HELP, WORKER_OPTIONS } from './commands.ts'
import { workerJobs } from './jobs-flags.ts'
import { repositoryOptions } from './repository-flags.ts'
import { linkOptions, probeOptions, recordOptions, storeOptions, workerLossOptions } from './reliability-flags.ts'

describe('reliability flags', () => {
  it('records: TTL and size from the flags, else the documented 7 days and 1 GiB', () => {
    expect(recordOptions({})).toEqual({ recordTtlMs: 7 * 24 * 3600_000, recordMaxBytes: 1024 ** 3 })
    expect(DEFAULT_RECORD_TTL_MS).toBe(7 * 24 * 3600_000)
    expect(DEFAULT_RECORD_MAX_BYTES).toBe(1024 ** 3)
    expect(recordOptions({ 'job-record-ttl-ms': '3600000', 'job-record-max-bytes': '1048576' })).toEqual({ recordTtlMs: 3_600_000, recordMaxBytes: 1_048_576 })
    expect(() => recordOptions({ 'job-record-ttl-ms': '0' })).toThrow(/--job-record-ttl-ms must be an integer >= 1/)
  })

  it('the store retry reaches the worker jobs options (0 allowed: hand back at once)', () => {
    const queue = {} as JobQueue
    expect(workerJobs({}, queue).storeRetryMs).toBeUndefined() // not given: JobRunner applies DEFAULT_STORE_RETRY_MS (only given values are passed on)
    expect(DEFAULT_STORE_RETRY_MS).toBe(30_000)
    expect(workerJobs({ 'job-store-retry-ms': '5000' }, queue).storeRetryMs).toBe(5000)
    expect(storeOptions({ 'job-store-retry-ms': '0' })).toEqual({ storeRetryMs: 0 })
    expect(() => storeOptions({ 'job-store-retry-ms': '-1' })).toThrow(/>= 0/)
  })

  it('--no-worker-probes turns the probes off in the worker-loss options; --missed-heartbeats 0 turns detection off', () => {
    expect(probeOptions({})).toEqual({})
    expect(workerLossOptions({})).toEqual({})
    expect(workerLossOptions({ 'no-worker-probes': true })).toEqual({ probes: false })
    expect(workerLossOptions({ 'no-worker-probes': true, 'missed-heartbeats': '5', 'accept-timeout-ms': '800' })).toEqual({
      probes: false,
      missedHeartbeats: 5,
      acceptTimeoutMs: 800,
    })
    expect(workerLossOptions({ 'missed-heartbeats': '0' })).toBe(false)
  })

  it('--allow-links-outside reaches the repository options, and needs a repository', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cohort-links-flag-'))
    expect(linkOptions({})).toEqual({})
    expect(repositoryOptions({ 'model-repository': dir }, {})?.allowLinksOutside).toBeUndefined()
    expect(repositoryOptions({ 'model-repository': dir, 'allow-links-outside': true }, {})?.allowLinksOutside).toBe(true)
    expect(() => repositoryOptions({ 'allow-links-outside': true }, {})).toThrow(/--allow-links-outside needs --model-repository DIR/)
  })

  it.each([
    ['serve', SERVE_OPTIONS, SERVE_HELP, ['job-record-ttl-ms', 'job-record-max-bytes', 'job-store-retry-ms', 'no-worker-probes', 'allow-links-outside']],
    ['gateway', GATEWAY_OPTIONS, GATEWAY_HELP, ['job-record-ttl-ms', 'job-record-max-bytes', 'no-worker-probes']],
    ['worker', WORKER_OPTIONS, WORKER_HELP, ['job-record-ttl-ms', 'job-record-max-bytes', 'job-store-retry-ms', 'allow-links-outside']],
  ] as const)('%s parses and lists its reliability flags', (_name, options, help, flags) => {
    for (const f of flags) {
      expect(Object.keys(options)).toContain(f)
      expect(help).toContain(`--${f}`)
    }
    const { values } = parse(
      flags.map((f) => (f.startsWith('no-') || f.startsWith('allow-') ? `--${f}` : `--${f}=7`)),
      options,
      true,
    )
    for (const f of flags) {
      expect(values[f]).toBeDefined()
    }
  })
})
