import type { GatewayOptions } from '@cohort/gateway'

/** `--no-worker-wait`: turn off the door's worker-wait check (docs/batching.md#admission-at-the-door). */
export const DOOR_OPTIONS = {
  'no-worker-wait': { type: 'boolean' },
} as const

export const DOOR_HELP = `  --no-worker-wait       do not refuse at the door by the workers' queue-wait estimates (by default a
                         request no worker can finish before its deadline is refused 503 before its
                         body is read, without a NATS round trip; the workers' own check stays)`

/** The gateway options of the door flags. */
export function doorOptions(v: Record<string, unknown>): Pick<GatewayOptions, 'workerWait'> {
  return v['no-worker-wait'] === true ? { workerWait: false } : {}
}
