// `--no-worker-wait`: parsed for serve and gateway, listed in their help, and taking effect: the
// door built from it has no worker-wait check (the event-loop-lag check is `--no-event-loop-lag-check`, old name `--no-front-door`).
import { describe, expect, it } from 'vitest'
import { createGatewayCore } from '@cohort/gateway'
import { InProcessTransport } from '@cohort/transport'
import { parse } from './args.ts'
import { DOOR_OPTIONS, doorOptions, httpKnobs, listenerBounds } from './door-flags.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS } from './commands.ts'

describe('door flags', () => {
  it('--no-worker-wait turns the worker-wait check off; without it the door has one', async () => {
    expect(doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values)).toEqual({ workerWait: false })
    expect(doorOptions(parse([], DOOR_OPTIONS).values)).toEqual({ workerWait: { control: { margin: 0.2 } } })
    const transport = new InProcessTransport()
    const cores = [
      createGatewayCore({ transport, ...doorOptions(parse([], DOOR_OPTIONS).values) }),
      createGatewayCore({ transport, ...doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values) }),
    ]
    expect(cores[0]!.door.workerWait).toBeDefined()
    expect(cores[1]!.door.workerWait).toBeUndefined()
    for (const c of cores) await c.close()
    await transport.close()
  })

  it('--admission-margin-pct sets the margin of the door (default 20%), at most 90', async () => {
    expect(doorOptions(parse(['--admission-margin-pct', '35'], DOOR_OPTIONS).values)).toEqual({ workerWait: { control: { margin: 0.35 } } })
    expect(() => doorOptions(parse(['--admission-margin-pct', '95'], DOOR_OPTIONS).values)).toThrow(/at most 90/)
    const transport = new InProcessTransport()
    const core = createGatewayCore({ transport, ...doorOptions(parse(['--admission-margin-pct', '0'], DOOR_OPTIONS).values) })
    expect(core.door.workerWait!.control.ceiling('m', '')).toBe(1)
    await core.close()
    await transport.close()
  })

  it('--max-connections and --listen-backlog: defaults 1024 and 511, 0 connections means unbounded', () => {
    const bounds = (args: string[]) => listenerBounds(httpKnobs(parse(args, GATEWAY_OPTIONS).values), () => undefined)
    expect(bounds([])).toMatchObject({ maxConnections: 1024, backlog: 511 })
    expect(bounds(['--max-connections', '0', '--listen-backlog', '64'])).toMatchObject({ maxConnections: 0, backlog: 64 })
    expect(parse(['--max-connections', '8'], SERVE_OPTIONS).values['max-connections']).toBe('8')
    expect(SERVE_HELP).toContain('--max-connections')
    expect(GATEWAY_HELP).toContain('--listen-backlog')
  })

  it('serve and gateway take the flag and list it in their help', () => {
    expect(parse(['--no-worker-wait'], SERVE_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(parse(['--no-worker-wait'], GATEWAY_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(SERVE_HELP).toContain('--no-worker-wait')
    expect(GATEWAY_HELP).toContain('--no-worker-wait')
  })
})
