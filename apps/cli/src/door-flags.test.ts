// `--no-worker-wait`: parsed for serve and gateway, listed in their help, and taking effect: the
// door built from it has no worker-wait check (the event-loop-lag check is `--no-front-door`).
import { describe, expect, it } from 'vitest'
import { InferenceDoor, Upstream, WorkerLiveness } from '@cohort/gateway'
import { Registry, gatewayMetrics } from '@cohort/metrics'
import { subjects } from '@cohort/protocol'
import { consoleErrorLogger, defaultTracer } from '@cohort/observability'
import { InProcessTransport } from '@cohort/transport'
import { parse } from './args.ts'
import { DOOR_OPTIONS, doorOptions } from './door-flags.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS } from './commands.ts'

describe('door flags', () => {
  it('--no-worker-wait turns the worker-wait check off; without it the door has one', async () => {
    expect(doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values)).toEqual({ workerWait: false })
    expect(doorOptions(parse([], DOOR_OPTIONS).values)).toEqual({})
    const transport = new InProcessTransport()
    const s = subjects('cohort')
    const lv = new WorkerLiveness(transport, s, 'g1')
    const door = (o: ReturnType<typeof doorOptions>) =>
      new InferenceDoor({ upstream: new Upstream(transport, s, 1000, lv), metrics: gatewayMetrics(new Registry()), requestTimeoutMs: 1000, tracer: defaultTracer(), logger: consoleErrorLogger, onUnexpectedError: () => undefined, ...o })
    expect(door(doorOptions(parse([], DOOR_OPTIONS).values)).workerWait).toBeDefined()
    expect(door(doorOptions(parse(['--no-worker-wait'], DOOR_OPTIONS).values)).workerWait).toBeUndefined()
    lv.close()
    await transport.close()
  })

  it('serve and gateway take the flag and list it in their help', () => {
    expect(parse(['--no-worker-wait'], SERVE_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(parse(['--no-worker-wait'], GATEWAY_OPTIONS).values['no-worker-wait']).toBe(true)
    expect(SERVE_HELP).toContain('--no-worker-wait')
    expect(GATEWAY_HELP).toContain('--no-worker-wait')
  })
})
