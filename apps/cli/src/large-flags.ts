import type { LargeMessageOptions } from '@cohort/transport'
import { intFlag } from './args.ts'

/** `--max-request-bytes`: the largest message over NATS, chunked beyond the server's max_payload. */
export const LARGE_OPTIONS = {
  'max-request-bytes': { type: 'string' },
} as const

export const LARGE_HELP = `  --max-request-bytes N  largest request or reply over NATS (default 67108864, 64 MiB); messages above
                         the server's max_payload travel in chunks; beyond N, 413 (the gateway's body
                         limit too, unless --max-body-bytes is given)`

/** The NATS transport's large-message options from the flags. */
export function largeMessageOptions(v: Record<string, unknown>): LargeMessageOptions {
  const n = intFlag('max-request-bytes', v['max-request-bytes'])
  return n === undefined ? {} : { maxMessageBytes: n }
}

/** The gateway's body limit: --max-body-bytes, else --max-request-bytes, else the gateway default. */
export function bodyLimit(v: Record<string, unknown>): { maxBodyBytes?: number } {
  const n = v['max-body-bytes'] === undefined ? intFlag('max-request-bytes', v['max-request-bytes']) : undefined
  return n === undefined ? {} : { maxBodyBytes: n }
}
