/**
 * The knob tables of each process's own flags (serve, gateway, worker): NATS, worker loss, drain,
 * admin keys, the worker's id, heartbeats, distribution and metrics server. One row per flag
 * ({@link knobs.ts}); each default a named constant.
 * @module
 */
import { DEFAULT_ACCEPT_TIMEOUT_MS, DEFAULT_MISSED_HEARTBEATS } from '@cohort/gateway'
import { DEFAULT_GENERATION_PROBE_MS, DEFAULT_HEARTBEAT_MS } from '@cohort/worker'
import { DEFAULT_HTTP_HOST } from './door-flags.ts'
import { knobGiven, knobHelp, knobOptions, knobValues, type Knob, type KnobDefaults, type KnobTable, type KnobValues } from './knobs.ts'

/** NATS server of gateway, worker and bridge when neither --nats nor $NATS_URL is given. */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222'
/** Default SIGTERM grace of the gateway: readiness answers 503 this long before it stops listening (5 s). */
export const DEFAULT_DRAIN_MS = 5_000
/** Default SIGTERM grace of `serve` (one process: nothing else to send the traffic to). */
export const DEFAULT_SERVE_DRAIN_MS = 0
/** `cohort worker --distribution` values; the first is the default. */
export const DISTRIBUTIONS = ['capacity', 'random'] as const

/** `--nats` of gateway, worker and bridge: a server list, from $NATS_URL or the default. */
export const NATS_KNOB = Object.freeze({
  nats: { kind: 'string', arg: 'URL', env: 'NATS_URL', default: DEFAULT_NATS_URL, help: ['NATS server(s), comma-separated'] },
} as const satisfies KnobTable)

const drainKnob = (defaultMs: number) =>
  ({
    kind: 'int',
    arg: 'MS',
    min: 0,
    default: defaultMs,
    help: [
      'on SIGTERM/SIGINT, answer 503 on /v2/health/ready while still serving for this',
      'long (default {default}); then stop listening, close idle connections and',
      'those still sending their request, let received requests finish within',
      'their deadline, and exit',
    ],
  }) as const satisfies Knob

const ADMIN_KEY = {
  kind: 'list',
  arg: 'KEY',
  env: 'COHORT_ADMIN_KEYS',
  help: ['key for /admin routes (repeatable; comma-separated in {default}); without one', 'they are open, or closed (403) when --api-key or a JWT secret is set'],
} as const satisfies Knob

/** `cohort serve`'s own knobs. */
export const SERVE_KNOBS = Object.freeze({
  nats: { kind: 'string', arg: 'URL', defaultText: 'in process', help: ['put NATS between the gateway and the worker'] },
  'drain-ms': drainKnob(DEFAULT_SERVE_DRAIN_MS),
  'admin-key': ADMIN_KEY,
} as const satisfies KnobTable)

/** `cohort gateway`'s own knobs (beyond {@link NATS_KNOB}). */
export const GATEWAY_KNOBS = Object.freeze({
  'drain-ms': drainKnob(DEFAULT_DRAIN_MS),
  'missed-heartbeats': {
    kind: 'int',
    arg: 'N',
    min: 0,
    default: DEFAULT_MISSED_HEARTBEATS,
    help: ['fail (503 WORKER_LOST) or retry the requests of a worker silent for N of its', 'heartbeats (default {default}; 0 turns worker-loss detection off)'],
  },
  'accept-timeout-ms': {
    kind: 'int',
    arg: 'MS',
    default: DEFAULT_ACCEPT_TIMEOUT_MS,
    help: ['a request no worker accepted in this long is lost too, and resent once'],
  },
  'admin-key': ADMIN_KEY,
} as const satisfies KnobTable)

/** `cohort worker`'s own knobs (beyond {@link NATS_KNOB}). */
export const WORKER_KNOBS = Object.freeze({
  id: { kind: 'string', arg: 'ID', defaultText: 'random', help: ['worker id in replies and discovery'] },
  'heartbeat-ms': {
    kind: 'int',
    arg: 'MS',
    min: 0,
    default: DEFAULT_HEARTBEAT_MS,
    help: ["publish a heartbeat this often, for the gateways' worker-loss detection", '(default {default}; 0: none)'],
  },
  'generation-probe-ms': {
    kind: 'int',
    arg: 'MS',
    min: 0,
    default: DEFAULT_GENERATION_PROBE_MS,
    help: [
      "generative models: a gateway's pack of generations that sent no tokens",
      'message this long gets an empty one, to notice a gateway gone (streamed',
      'generations are watched at every step; default {default}; 0: none)',
    ],
  },
} as const satisfies KnobTable)

/** `cohort worker --distribution` (in its Batching help section). */
export const DISTRIBUTION_KNOB = Object.freeze({
  distribution: {
    kind: 'string',
    arg: DISTRIBUTIONS.join('|'),
    choices: DISTRIBUTIONS,
    default: DISTRIBUTIONS[0],
    help: [
      "{default} (the default): leave the model's main subject while the queue is full,",
      `so idle workers get the work; ${DISTRIBUTIONS[1]}: plain NATS queue-group spreading`,
    ],
  },
} as const satisfies KnobTable)

/** The worker's metrics server (in its Observability help section). */
export const WORKER_METRICS_KNOBS = Object.freeze({
  'metrics-port': {
    kind: 'int',
    arg: 'N',
    min: 0,
    defaultText: 'off',
    help: ['serve Prometheus /metrics and the probes /v2/health/live and /v2/health/ready', '(503 while draining) on this port'],
  },
  'metrics-host': { kind: 'string', arg: 'H', env: 'COHORT_METRICS_HOST', default: DEFAULT_HTTP_HOST, help: ['host of the metrics server'] },
} as const satisfies KnobTable)

export const SERVE_PROCESS_OPTIONS = knobOptions(SERVE_KNOBS)
export const GATEWAY_PROCESS_OPTIONS = { ...knobOptions(NATS_KNOB), ...knobOptions(GATEWAY_KNOBS) }
export const WORKER_PROCESS_OPTIONS = { ...knobOptions(NATS_KNOB), ...knobOptions(WORKER_KNOBS), ...knobOptions(DISTRIBUTION_KNOB), ...knobOptions(WORKER_METRICS_KNOBS) }

/** Help of one row of a table (to place a knob in its command's help section). */
export function rowHelp<T extends KnobTable>(t: T, ...flags: (keyof T & string)[]): string {
  return knobHelp(Object.fromEntries(flags.map((f) => [f, t[f]])) as KnobTable)
}

/** The frozen values of `serve`'s own knobs. */
export function serveKnobs(v: Record<string, unknown>): KnobDefaults<typeof SERVE_KNOBS> {
  return knobValues(SERVE_KNOBS, v)
}

/** The frozen values of `gateway`'s own knobs. */
export function gatewayKnobs(v: Record<string, unknown>): KnobDefaults<typeof NATS_KNOB> & KnobDefaults<typeof GATEWAY_KNOBS> {
  return Object.freeze({ ...knobValues(NATS_KNOB, v), ...knobValues(GATEWAY_KNOBS, v) })
}

/**
 * The frozen values of `worker`'s own knobs; the heartbeat and probe periods only when given (the
 * worker defaults them to the same constants).
 */
export function workerKnobs(
  v: Record<string, unknown>,
): KnobDefaults<typeof NATS_KNOB> & KnobValues<typeof WORKER_KNOBS> & KnobDefaults<typeof DISTRIBUTION_KNOB> & KnobDefaults<typeof WORKER_METRICS_KNOBS> {
  return Object.freeze({ ...knobValues(NATS_KNOB, v), ...knobGiven(WORKER_KNOBS, v), ...knobValues(DISTRIBUTION_KNOB, v), ...knobValues(WORKER_METRICS_KNOBS, v) })
}
