// The process knob tables (serve, gateway, worker): help defaults are the constants, values come
// from the flag, then the env var, then the default, and a bad value is refused naming its flag.
import { describe, expect, it } from 'vitest'
import { DEFAULT_ACCEPT_TIMEOUT_MS, DEFAULT_MISSED_HEARTBEATS } from '@cohort/gateway'
import { DEFAULT_GENERATION_PROBE_MS, DEFAULT_HEARTBEAT_MS } from '@cohort/worker'
import { parse } from './args.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS, WORKER_HELP, WORKER_OPTIONS } from './commands.ts'
import { DEFAULT_DRAIN_MS, DEFAULT_NATS_URL, DEFAULT_SERVE_DRAIN_MS, gatewayKnobs, serveKnobs, workerKnobs } from './process-flags.ts'

describe('process knob tables', () => {
  it('help shows the constants as defaults', () => {
    expect(GATEWAY_HELP).toContain(`(default $NATS_URL or ${DEFAULT_NATS_URL})`)
    expect(GATEWAY_HELP).toMatch(new RegExp(`--drain-ms MS[^]*?default ${DEFAULT_DRAIN_MS}\\)`))
    expect(SERVE_HELP).toMatch(new RegExp(`--drain-ms MS[^]*?default ${DEFAULT_SERVE_DRAIN_MS}\\)`))
    expect(GATEWAY_HELP).toContain(`(default ${DEFAULT_MISSED_HEARTBEATS}; 0 turns worker-loss detection off)`)
    expect(GATEWAY_HELP).toContain(`(default ${DEFAULT_ACCEPT_TIMEOUT_MS})`)
    expect(WORKER_HELP).toContain(`(default ${DEFAULT_HEARTBEAT_MS}; 0: none)`)
    expect(WORKER_HELP).toContain(`default ${DEFAULT_GENERATION_PROBE_MS}; 0: none)`)
    expect(WORKER_HELP).toContain('capacity (the default)')
  })

  it('values: flag, env var, default; frozen', () => {
    const g = gatewayKnobs(parse([], GATEWAY_OPTIONS).values)
    expect(g['drain-ms']).toBe(DEFAULT_DRAIN_MS)
    expect(g['missed-heartbeats']).toBe(DEFAULT_MISSED_HEARTBEATS)
    expect(Object.isFrozen(g)).toBe(true)
    expect(gatewayKnobs(parse(['--missed-heartbeats', '0', '--admin-key', 'k'], GATEWAY_OPTIONS).values)).toMatchObject({ 'missed-heartbeats': 0, 'admin-key': ['k'] })
    expect(serveKnobs(parse([], SERVE_OPTIONS, true).values)).toMatchObject({ nats: undefined, 'drain-ms': DEFAULT_SERVE_DRAIN_MS })
    const w = workerKnobs(parse(['--distribution', 'random'], WORKER_OPTIONS, true).values)
    expect(w).toMatchObject({ distribution: 'random', 'heartbeat-ms': undefined, 'metrics-port': undefined })
    expect(workerKnobs(parse([], WORKER_OPTIONS, true).values).distribution).toBe('capacity')
  })

  it('refuses unknown flags and bad values, naming the flag', () => {
    expect(() => parse(['--drain', '5'], GATEWAY_OPTIONS)).toThrow(/unknown option --drain /)
    expect(() => gatewayKnobs(parse(['--accept-timeout-ms', '0'], GATEWAY_OPTIONS).values)).toThrow(/--accept-timeout-ms must be an integer >= 1/)
    expect(() => gatewayKnobs(parse(['--drain-ms', '5x'], GATEWAY_OPTIONS).values)).toThrow(/--drain-ms must be an integer >= 0/)
    expect(() => workerKnobs(parse(['--distribution', 'roundrobin'], WORKER_OPTIONS, true).values)).toThrow(/--distribution must be one of capacity, random/)
    expect(() => workerKnobs(parse(['--heartbeat-ms', '1e3'], WORKER_OPTIONS, true).values)).toThrow(/--heartbeat-ms must be an integer >= 0/)
  })
})
