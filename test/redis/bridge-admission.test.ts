// The Redis bridge enters the gateway's inference door (origin `bridge`): a real redis-server, the
// bridge in this process over an in-process bus whose one "worker" announces, by heartbeat, a queue
// for `m` no entry's deadline can wait out. After the one probe (answered), the next entry is refused
// by the door's worker-wait check, retried until its deadline, and written as failed OVERLOADED,
// never published to the workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { decodeRequest, encodeHeartbeat, encodeReply, subjects } from '@cohort/protocol'
import { WebhookSender } from '@cohort/predictions'
import { InProcessTransport } from '@cohort/transport'
import { createGatewayCore, type GatewayCore } from '@cohort/gateway'
import { RedisBridge } from '../../apps/cli/src/bridge/redis-bridge.ts'
import { startRedisServer, type RedisServerHandle } from './redis-server.ts'
import { ifStarted } from '@cohort/test-support'

const subj = subjects()
let redis: RedisServerHandle
let reader: RedisServerHandle['client']
let transport: InProcessTransport
let core: GatewayCore
let bridge: RedisBridge
let webhooks: WebhookSender
const published: string[] = []

beforeAll(async () => {
  redis = await startRedisServer()
  reader = redis.client.duplicate()
  transport = new InProcessTransport()
  core = createGatewayCore({ transport, workerWait: { probeIntervalMs: 1e9 } })
  const sub = transport.subscribe(subj.infer('m'))
  void (async () => {
    for await (const m of sub) {
      published.push(m.subject)
      const req = decodeRequest(m.data)
      m.respond(encodeReply({ v: 1, id: req.id, items: [{ y: 1 }] }))
    }
  })()
  transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 600_000, proto: 1, models: { m: { queued: 1000, waitMs: 60_000, serviceMs: 10 } } }))
  webhooks = new WebhookSender({})
  const caller = (r: RedisServerHandle['client']) => ({ call: (c: string, ...a: (string | number)[]) => r.call(c, ...a) })
  bridge = new RedisBridge({ redis: caller(redis.client), reader: caller(reader), door: core.door, webhooks, consumer: 'c1', timeoutMs: 1_500, blockMs: 100 })
  await bridge.start()
})

afterAll(async () => {
  await ifStarted(bridge)?.stop()
  ifStarted(webhooks)?.close()
  ifStarted(reader)?.disconnect()
  await ifStarted(core)?.close()
  await ifStarted(transport)?.close()
  await ifStarted(redis)?.stop()
})

async function result(id: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i++) {
    const v = await redis.client.get(`cohort:result:${id}`)
    if (v !== null) {
      return JSON.parse(v) as Record<string, unknown>
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`no result for ${id}`)
}

describe('the Redis bridge passes the door', () => {
  it('after the probe, an entry no worker can serve in time fails OVERLOADED at the door, unpublished', async () => {
    await redis.client.xadd('cohort:requests', '*', 'id', 'probe', 'model', 'm', 'input', '{"x":1}')
    expect(await result('probe')).toMatchObject({ status: 'succeeded', output: { y: 1 } })
    const sent = published.length
    await redis.client.xadd('cohort:requests', '*', 'id', 'late', 'model', 'm', 'input', '{"x":2}')
    const late = await result('late')
    expect(late).toMatchObject({ status: 'failed', error: expect.stringMatching(/worker-wait check/) })
    expect(published.length).toBe(sent)
  })
})
