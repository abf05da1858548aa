/**
 * The large-message knobs (serve, gateway, worker): the bus message limit and the in-flight bounds,
 * one table row each ({@link knobs.ts}). `--max-request-bytes` is `--max-message-bytes`' older
 * name, still accepted. The transport and the gateway default these themselves, so only given
 * values are passed on ({@link knobGiven}); the rows show those same constants in help.
 * @module
 */
import { DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_INFLIGHT_REQUESTS, DEFAULT_MAX_MESSAGE_BYTES, type InflightLimits, type LargeMessageOptions } from '@cohort/transport'
import { knobGiven, knobHelp, knobOptions, type Knob } from './knobs.ts'

const mib = (n: number) => `${n / (1024 * 1024)} MiB`

/** The large-message knobs. */
export const LARGE_KNOBS = Object.freeze({
  'max-message-bytes': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_MAX_MESSAGE_BYTES,
    aliases: ['max-request-bytes'],
    help: [
      `largest request or reply over NATS, maxMessageBytes (default {default}, ${mib(DEFAULT_MAX_MESSAGE_BYTES)});`,
      "messages above the server's max_payload travel in chunks; beyond N, 413 (the",
      "gateway's body limit too, unless --max-body-bytes is given)",
    ],
  },
  'max-inflight-requests': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_MAX_INFLIGHT_REQUESTS,
    help: ["most requests held at once (default {default}): the gateway's bodies, the", "worker's received requests; past it 503 OVERLOADED + Retry-After"],
  },
  'max-inflight-bytes': {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_MAX_INFLIGHT_BYTES,
    help: [
      `most request bytes held at once (default {default}, ${mib(DEFAULT_MAX_INFLIGHT_BYTES)}; chunked`,
      'messages count in full); past it 503 before the body is read or pulled',
    ],
  },
} as const satisfies Record<string, Knob>)

export const LARGE_OPTIONS = knobOptions(LARGE_KNOBS)
export const LARGE_HELP = knobHelp(LARGE_KNOBS)

/** The in-flight bounds from --max-inflight-requests and --max-inflight-bytes (defaults where absent). */
export function inflightLimits(v: Record<string, unknown>): { inflight?: InflightLimits } {
  const k = knobGiven(LARGE_KNOBS, v, {})
  const maxRequests = k['max-inflight-requests']
  const maxBytes = k['max-inflight-bytes']
  if (maxRequests === undefined && maxBytes === undefined) {
    return {}
  }
  return { inflight: { ...(maxRequests !== undefined ? { maxRequests } : {}), ...(maxBytes !== undefined ? { maxBytes } : {}) } }
}

/** The NATS transport's large-message options and in-flight bounds (received requests) from the flags. */
export function largeMessageOptions(v: Record<string, unknown>): LargeMessageOptions & { inflight?: InflightLimits } {
  const n = knobGiven(LARGE_KNOBS, v, {})['max-message-bytes']
  return { ...(n === undefined ? {} : { maxMessageBytes: n }), ...inflightLimits(v) }
}

/**
 * The gateway's body limit (--max-body-bytes, else --max-message-bytes, else the gateway default)
 * and its in-flight bounds.
 */
export function bodyLimit(v: Record<string, unknown>): { maxBodyBytes?: number; inflight?: InflightLimits } {
  const n = v['max-body-bytes'] === undefined ? knobGiven(LARGE_KNOBS, v, {})['max-message-bytes'] : undefined
  return { ...(n === undefined ? {} : { maxBodyBytes: n }), ...inflightLimits(v) }
}
