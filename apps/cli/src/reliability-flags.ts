/**
 * Knob tables of the reliability options that had no flags (docs/reliability.md): the retention of
 * async prediction records (serve, gateway, worker: whoever creates the JetStream bucket and
 * stream), how long a worker retries storing a job's result, the gateway's worker probes, and
 * links out of a model repository (serve, worker). One row per knob ({@link knobs.ts}).
 * @module
 */
import { DEFAULT_RECORD_MAX_BYTES, DEFAULT_RECORD_TTL_MS, type NatsJobQueueOptions } from '@cohort/transport'
import { DEFAULT_STORE_RETRY_MS, type WorkerJobOptions } from '@cohort/worker'
import type { WorkerLossOptions } from '@cohort/gateway'
import { ifSet, knobGiven, knobHelp, knobOptions, knobValues, type Knob } from './knobs.ts'
import { GATEWAY_KNOBS } from './process-flags.ts'

/** Retention of async prediction records and queued jobs (whoever creates the bucket and stream). */
export const RECORD_KNOBS = Object.freeze({
  'job-record-ttl-ms': {
    kind: 'int',
    arg: 'MS',
    default: DEFAULT_RECORD_TTL_MS,
    help: ['async prediction records (and jobs still queued) expire this long after their', 'last write; set when the bucket and stream are first created'],
  },
  'job-record-max-bytes': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_RECORD_MAX_BYTES,
    help: ['bytes the records bucket (and the jobs stream) may hold; a full one answers', '503 JOBS_UNAVAILABLE; set when they are first created'],
  },
} as const satisfies Record<string, Knob>)

/** A worker's retry of a job result it could not store. */
export const STORE_KNOBS = Object.freeze({
  'job-store-retry-ms': {
    kind: 'int',
    arg: 'MS',
    default: DEFAULT_STORE_RETRY_MS,
    min: 0,
    help: ['retry storing a job result that could not be stored (KV unavailable) this long,', 'the job kept alive, before handing it back to run again'],
  },
} as const satisfies Record<string, Knob>)

/** The gateway's worker probes (docs/architecture.md#worker-loss). */
export const PROBE_KNOBS = Object.freeze({
  'no-worker-probes': {
    kind: 'bool',
    help: ["do not probe a silent worker's $SRV.PING subject: a killed worker's requests are", 'then lost only after its missed heartbeats (by default two no-responders: ~1 s)'],
  },
} as const satisfies Record<string, Knob>)

/** Links out of a model repository (docs/repository.md#symbolic-links). */
export const LINK_KNOBS = Object.freeze({
  'allow-links-outside': {
    kind: 'bool',
    help: ['follow symbolic links in the model repository that resolve outside it (by', 'default such a version is UNAVAILABLE, the link and its target in its reason)'],
  },
} as const satisfies Record<string, Knob>)

export const RECORD_OPTIONS = knobOptions(RECORD_KNOBS)
export const RECORD_HELP = knobHelp(RECORD_KNOBS)
export const STORE_OPTIONS = knobOptions(STORE_KNOBS)
export const STORE_HELP = knobHelp(STORE_KNOBS)
export const PROBE_OPTIONS = knobOptions(PROBE_KNOBS)
export const PROBE_HELP = knobHelp(PROBE_KNOBS)
export const LINK_OPTIONS = knobOptions(LINK_KNOBS)
export const LINK_HELP = knobHelp(LINK_KNOBS)

/** `recordTtlMs` and `recordMaxBytes` of the job queue. */
export function recordOptions(v: Record<string, unknown>): Pick<NatsJobQueueOptions, 'recordTtlMs' | 'recordMaxBytes'> {
  const k = knobValues(RECORD_KNOBS, v)
  return { recordTtlMs: k['job-record-ttl-ms'], recordMaxBytes: k['job-record-max-bytes'] }
}

/** `storeRetryMs` of a worker's jobs. */
export function storeOptions(v: Record<string, unknown>): Pick<WorkerJobOptions, 'storeRetryMs'> {
  return ifSet('storeRetryMs', knobGiven(STORE_KNOBS, v, {})['job-store-retry-ms'])
}

/** `probes` of the gateway's worker-loss detection (only `false` is said; on is the default). */
export function probeOptions(v: Record<string, unknown>): { probes?: false } {
  return knobValues(PROBE_KNOBS, v)['no-worker-probes'] ? { probes: false } : {}
}

/** `allowLinksOutside` of the repository (only `true` is said; off is the default). */
export function linkOptions(v: Record<string, unknown>): { allowLinksOutside?: true } {
  return knobValues(LINK_KNOBS, v)['allow-links-outside'] ? { allowLinksOutside: true } : {}
}

/**
 * The gateway's worker-loss options from `--missed-heartbeats` (0: detection off), `--accept-timeout-ms`
 * and `--no-worker-probes`.
 */
export function workerLossOptions(v: Record<string, unknown>): WorkerLossOptions | false {
  const k = knobGiven(GATEWAY_KNOBS, v, {})
  if (k['missed-heartbeats'] === 0) {
    return false
  }
  return { ...ifSet('missedHeartbeats', k['missed-heartbeats']), ...ifSet('acceptTimeoutMs', k['accept-timeout-ms']), ...probeOptions(v) }
}
