// `--no-worker-wait`: parsed for serve and gateway, listed in their help, and taking effect: the
// door built from it has no worker-wait check (the event-loop-lag check is `--no-event-loop-lag-check`, old name `--no-front-door`).
import { describe, expect, it } from 'vitest'
import { createGatewayCore } from '@cohort/gateway'
import { InProcessTransport } from '@cohort/transport'
import { parse } from './args.ts'
import { DOOR_OPTIONS, doorOptions } from './door-flags.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS } from './commands.ts'

describe('door flags', () => {
  it('--no-worker-wait turns the worker-wait check off; without it the door has one', async () => {
    expect(doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values)).toEqual({ workerWait: false })
    expect(doorOptions(parse([], DOOR_OPTIONS).values)).toEqual({})
    const transport = new InProcessTransport()
    const cores = [createGatewayCore({ transport, ...doorOptions(parse([], DOOR_OPTIONS).values) }), createGatewayCore({ transport, ...doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values) })]
    expect(cores[0]!.door.workerWait).toBeDefined()
    expect(cores[1]!.door.workerWait).toBeUndefined()
    for (const c of cores) await c.close()
    await transport.close()
  })

  it('serve and gateway take the flag and list it in their help', () => {
    expect(parse(['--no-worker-wait'], SERVE_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(parse(['--no-worker-wait'], GATEWAY_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(SERVE_HELP).toContain('--no-worker-wait')
    expect(GATEWAY_HELP).toContain('--no-worker-wait')
  })
})
