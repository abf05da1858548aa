/**
 * The knob table of the gateway's HTTP listener and its door (`cohort serve`, `cohort gateway`):
 * flag, env var, default, bounds and help in one row each ({@link knobs.ts}); the parser options,
 * the help lines and the frozen values are all made from it.
 * @module
 */
import { DEFAULT_ADMISSION_MARGIN, DEFAULT_REQUEST_TIMEOUT_MS, type GatewayOptions } from '@cohort/gateway'
import { CliError } from './cli-error.ts'
import { knobHelp, knobOptions, knobValues, type Knob, type KnobDefaults } from './knobs.ts'
import { DEFAULT_LISTEN_BACKLOG, DEFAULT_MAX_CONNECTIONS, type ListenerBounds } from './listener-bounds.ts'

/** Default HTTP port of `serve` and `gateway` (also `$PORT`). */
export const DEFAULT_HTTP_PORT = 8080
/** Default HTTP host: loopback only. */
export const DEFAULT_HTTP_HOST = '127.0.0.1'

/** The HTTP listener's knobs. */
export const HTTP_KNOBS = Object.freeze({
  port: { kind: 'int', arg: 'N', env: 'PORT', default: DEFAULT_HTTP_PORT, min: 0, help: ['HTTP port'] },
  host: { kind: 'string', arg: 'H', env: 'COHORT_HOST', default: DEFAULT_HTTP_HOST, help: ['HTTP host'] },
  'timeout-ms': { kind: 'int', arg: 'MS', default: DEFAULT_REQUEST_TIMEOUT_MS, help: ['server-side request deadline'] },
  'max-connections': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_MAX_CONNECTIONS,
    min: 0,
    help: ['most open HTTP connections; a new one over it is answered 503 at accept', 'and closed, before it is parsed (0: unbounded)'],
  },
  'listen-backlog': { kind: 'int', arg: 'N', default: DEFAULT_LISTEN_BACKLOG, help: ['connections the kernel queues before they are accepted (capped by', 'net.core.somaxconn)'] },
} as const satisfies Record<string, Knob>)

/** The door's knobs: its admission checks (docs/architecture.md#the-inference-door). */
export const DOOR_KNOBS = Object.freeze({
  'admission-margin-pct': {
    kind: 'int',
    arg: 'P',
    default: Math.round(DEFAULT_ADMISSION_MARGIN * 100),
    min: 0,
    help: [
      'admit a request only when its predicted finish (queue wait + run + the',
      "gateway's delay) is within (100 - P)% of its time left; the margin grows while",
      'admitted requests finish late and decays back to P (0-90; docs/architecture.md#admission-target)',
    ],
  },
  'no-event-loop-lag-check': {
    kind: 'bool',
    aliases: ['no-front-door'],
    help: [
      "turn off the door's event-loop-lag check: do not take the event loop's delay",
      'off request deadlines (by default a request already late on arrival is refused',
      '503 before its body is read; docs/batching.md#admission-at-the-door)',
    ],
  },
  'no-worker-wait': {
    kind: 'bool',
    help: [
      "do not refuse at the door by the workers' queue-wait estimates (by default a",
      'request no worker can finish before its deadline is refused 503 before its',
      "body is read, without a NATS round trip; the workers' own check stays)",
    ],
  },
} as const satisfies Record<string, Knob>)

export const HTTP_OPTIONS = knobOptions(HTTP_KNOBS)
export const HTTP_KNOB_HELP = knobHelp(HTTP_KNOBS)
export const DOOR_OPTIONS = knobOptions(DOOR_KNOBS)
export const DOOR_HELP = knobHelp(DOOR_KNOBS)

/** The frozen values of the HTTP and door knobs. */
export function httpKnobs(v: Record<string, unknown>): KnobDefaults<typeof HTTP_KNOBS> & KnobDefaults<typeof DOOR_KNOBS> {
  return Object.freeze({ ...knobValues(HTTP_KNOBS, v), ...knobValues(DOOR_KNOBS, v) })
}

/** The gateway options of the door flags. */
export function doorOptions(v: Record<string, unknown>): Pick<GatewayOptions, 'workerWait'> {
  const k = knobValues(DOOR_KNOBS, v)
  if (k['no-worker-wait']) {
    return { workerWait: false }
  }
  const pct = k['admission-margin-pct']
  if (pct > 90) {
    throw new CliError(`--admission-margin-pct must be at most 90, got ${pct}`)
  }
  return { workerWait: { control: { margin: pct / 100 } } }
}

/** The listener bounds of the HTTP knobs; `onRefused` counts a connection refused at accept. */
export function listenerBounds(k: ReturnType<typeof httpKnobs>, onRefused: () => void): ListenerBounds {
  return { maxConnections: k['max-connections'], backlog: k['listen-backlog'], onRefused }
}
