import { DEFAULT_MAX_MESSAGE_BYTES, type InflightLimits, type LargeMessageOptions } from '@cohort/transport'
import { intFlag } from './args.ts'
import { CliError } from './cli-error.ts'

/**
 * `--max-message-bytes`: the bus message limit (`maxMessageBytes`), the largest message over NATS,
 * chunked beyond the server's max_payload. `--max-request-bytes` is its older name, still accepted.
 */
export const LARGE_OPTIONS = {
  'max-message-bytes': { type: 'string' },
  'max-request-bytes': { type: 'string' },
  'max-inflight-requests': { type: 'string' },
  'max-inflight-bytes': { type: 'string' },
} as const

export const LARGE_HELP = `  --max-message-bytes N  largest request or reply over NATS, maxMessageBytes (default ${DEFAULT_MAX_MESSAGE_BYTES}, 64 MiB);
                         messages above the server's max_payload travel in chunks; beyond N, 413 (the
                         gateway's body limit too, unless --max-body-bytes is given). Alias:
                         --max-request-bytes
  --max-inflight-requests N  most requests held at once (default 1024): the gateway's bodies, the
                         worker's received requests; past it 503 OVERLOADED + Retry-After
  --max-inflight-bytes N most request bytes held at once (default 268435456, 256 MiB; chunked
                         messages count in full); past it 503 before the body is read or pulled`

/** The bus message limit from --max-message-bytes or its alias --max-request-bytes. */
function messageLimit(v: Record<string, unknown>): number | undefined {
  const a = intFlag('max-message-bytes', v['max-message-bytes'])
  const b = intFlag('max-request-bytes', v['max-request-bytes'])
  if (a !== undefined && b !== undefined && a !== b) {
    throw new CliError('--max-message-bytes and its alias --max-request-bytes disagree; give one')
  }
  return a ?? b
}

/** The in-flight bounds from --max-inflight-requests and --max-inflight-bytes (defaults where absent). */
export function inflightLimits(v: Record<string, unknown>): { inflight?: InflightLimits } {
  const maxRequests = intFlag('max-inflight-requests', v['max-inflight-requests'])
  const maxBytes = intFlag('max-inflight-bytes', v['max-inflight-bytes'])
  if (maxRequests === undefined && maxBytes === undefined) {
    return {}
  }
  return { inflight: { ...(maxRequests !== undefined ? { maxRequests } : {}), ...(maxBytes !== undefined ? { maxBytes } : {}) } }
}

/** The NATS transport's large-message options and in-flight bounds (received requests) from the flags. */
export function largeMessageOptions(v: Record<string, unknown>): LargeMessageOptions & { inflight?: InflightLimits } {
  const n = messageLimit(v)
  return { ...(n === undefined ? {} : { maxMessageBytes: n }), ...inflightLimits(v) }
}

/**
 * The gateway's body limit (--max-body-bytes, else --max-message-bytes, else the gateway default)
 * and its in-flight bounds.
 */
export function bodyLimit(v: Record<string, unknown>): { maxBodyBytes?: number; inflight?: InflightLimits } {
  const n = v['max-body-bytes'] === undefined ? messageLimit(v) : undefined
  return { ...(n === undefined ? {} : { maxBodyBytes: n }), ...inflightLimits(v) }
}
