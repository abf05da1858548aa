import { DEFAULT_SUBJECT_PREFIX, kvBuckets } from '@cohort/protocol'
import { CliError } from './cli-error.ts'
import { knobHelp, knobOptions, type KnobTable } from './knobs.ts'

/**
 * `--subject-prefix P` of serve, gateway and worker: the deployment's NATS names. One value feeds
 * every place that names something on the bus (the gateway's and worker's `subjectPrefix`, the
 * transport's KV buckets, the job stream's `prefix`, remote pipeline stages), so a gateway and its
 * workers agree as long as they are given the same flag.
 */
export const PREFIX_KNOBS = Object.freeze({
  'subject-prefix': {
    kind: 'string',
    arg: 'P',
    default: DEFAULT_SUBJECT_PREFIX,
    help: [
      'NATS names of this deployment (default {default}): subjects P.infer.<model>...,',
      'KV buckets P-models and P-config, job stream P.jobs; give gateways and workers',
      'the same P. Deployments with different prefixes share a NATS server without',
      "seeing each other's models",
    ],
  },
} as const satisfies KnobTable)

export const PREFIX_OPTIONS = knobOptions(PREFIX_KNOBS)
export const PREFIX_HELP = knobHelp(PREFIX_KNOBS)

/** The prefix from --subject-prefix (undefined: the default), checked as NATS-token-safe. */
export function subjectPrefix(v: Record<string, unknown>): string | undefined {
  const p = v['subject-prefix']
  if (p === undefined) {
    return undefined
  }
  if (typeof p !== 'string') {
    throw new CliError('--subject-prefix takes a value, e.g. --subject-prefix staging')
  }
  try {
    kvBuckets(p)
  } catch (e) {
    throw new CliError(`--subject-prefix: ${e instanceof Error ? e.message : String(e)}`)
  }
  return p
}

/** `{ subjectPrefix }` to spread into gateway, worker and transport options (nothing for the default). */
export function prefixOption(v: Record<string, unknown>): { subjectPrefix?: string } {
  const p = subjectPrefix(v)
  return p === undefined ? {} : { subjectPrefix: p }
}
