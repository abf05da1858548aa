/**
 * The knob table of `cohort bridge redis` ({@link knobs.ts}): one row per flag, each default the
 * bridge's own constant.
 * @module
 */
import { BRIDGE_DEFAULTS, DEFAULT_BRIDGE_TIMEOUT_MS } from './bridge/redis-bridge.ts'
import { knobHelp, knobOptions, knobValues, type KnobDefaults, type KnobTable } from './knobs.ts'
import { NATS_KNOB } from './process-flags.ts'

/** Redis server when neither --redis nor $REDIS_URL is given. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379'

/** The bridge's knobs. */
export const BRIDGE_KNOBS = Object.freeze({
  redis: { kind: 'string', arg: 'URL', env: 'REDIS_URL', default: DEFAULT_REDIS_URL, help: ['Redis server'] },
  ...NATS_KNOB,
  stream: { kind: 'string', arg: 'KEY', default: BRIDGE_DEFAULTS.stream, help: ['request stream (default {default}; created with the group if missing)'] },
  group: { kind: 'string', arg: 'NAME', default: BRIDGE_DEFAULTS.group, help: ['consumer group'] },
  consumer: { kind: 'string', arg: 'NAME', defaultText: '<hostname>-<pid>', help: ['consumer name, unique per bridge'] },
  results: { kind: 'string', arg: 'KEY', default: BRIDGE_DEFAULTS.results, help: ['results stream'] },
  concurrency: { kind: 'int', arg: 'N', default: BRIDGE_DEFAULTS.concurrency, help: ['entries in flight at once'] },
  'claim-idle-ms': {
    kind: 'int',
    arg: 'MS',
    default: BRIDGE_DEFAULTS.claimIdleMs,
    help: ['claim entries pending this long on another consumer, e.g. a bridge that', 'died (default {default}; keep it above the longest prediction)'],
  },
  'timeout-ms': { kind: 'int', arg: 'MS', default: DEFAULT_BRIDGE_TIMEOUT_MS, help: ['deadline of one entry, retries of transient errors included'] },
} as const satisfies KnobTable)

export const BRIDGE_OPTIONS = knobOptions(BRIDGE_KNOBS)
export const BRIDGE_KNOB_HELP = knobHelp(BRIDGE_KNOBS)

/** The frozen values of the bridge's knobs. */
export function bridgeKnobs(v: Record<string, unknown>, env: Record<string, string | undefined> = process.env): KnobDefaults<typeof BRIDGE_KNOBS> {
  return knobValues(BRIDGE_KNOBS, v, env)
}
