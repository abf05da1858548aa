// `cohort bridge redis`'s knob table: help defaults are the bridge's constants; values from the
// flag, then the env var, then the default; bad values refused naming the flag.
import { describe, expect, it } from 'vitest'
import { parse } from './args.ts'
import { BRIDGE_KNOB_HELP, BRIDGE_OPTIONS, DEFAULT_REDIS_URL, bridgeKnobs } from './bridge-flags.ts'
import { BRIDGE_DEFAULTS, DEFAULT_BRIDGE_TIMEOUT_MS } from './bridge/redis-bridge.ts'

describe('bridge knobs', () => {
  it('help defaults are the constants', () => {
    for (const d of [
      DEFAULT_REDIS_URL,
      BRIDGE_DEFAULTS.stream,
      BRIDGE_DEFAULTS.group,
      BRIDGE_DEFAULTS.results,
      BRIDGE_DEFAULTS.concurrency,
      BRIDGE_DEFAULTS.claimIdleMs,
      DEFAULT_BRIDGE_TIMEOUT_MS,
    ]) {
      expect(BRIDGE_KNOB_HELP).toContain(`default ${typeof d === 'string' && d === DEFAULT_REDIS_URL ? `$REDIS_URL or ${d}` : d}`)
    }
  })

  it('values and refusals', () => {
    expect(bridgeKnobs(parse([], BRIDGE_OPTIONS).values, {})).toMatchObject({ redis: DEFAULT_REDIS_URL, concurrency: BRIDGE_DEFAULTS.concurrency, consumer: undefined })
    expect(bridgeKnobs(parse([], BRIDGE_OPTIONS).values, { REDIS_URL: 'redis://r:1' }).redis).toBe('redis://r:1')
    expect(() => bridgeKnobs(parse(['--concurrency', '0'], BRIDGE_OPTIONS).values, {})).toThrow(/--concurrency must be an integer >= 1/)
    expect(() => parse(['--claim-idle', '5'], BRIDGE_OPTIONS)).toThrow(/unknown option --claim-idle/)
  })
})
