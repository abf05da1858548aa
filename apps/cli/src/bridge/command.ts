/**
 * `cohort bridge redis`: Redis Streams ingress (see docs/predictions.md#redis-streams-ingress).
 * @module
 */
import { hostname } from 'node:os'
import { Redis } from 'ioredis'
import { createGatewayCore } from '@cohort/gateway'
import { WebhookSender } from '@cohort/predictions'
import { createNatsTransport } from '@cohort/transport'
import { parse } from '../args.ts'
import { WEBHOOK_HELP, WEBHOOK_OPTIONS, webhookOptions } from '../jobs-flags.ts'
import { CliError } from '../cli-error.ts'
import { connectNats } from '../connect.ts'
import { NATS_AUTH_HELP, NATS_AUTH_OPTIONS, natsAuthOptions } from '../nats-auth.ts'
import { BRIDGE_KNOB_HELP, BRIDGE_OPTIONS, bridgeKnobs } from '../bridge-flags.ts'
import { RedisBridge, type RedisCaller } from './redis-bridge.ts'

export const BRIDGE_HELP = `cohort bridge redis [options]
Redis Streams ingress: reads prediction requests (fields id, model, input as JSON, optional webhook)
from a stream with a consumer group, runs each as one item on the model's workers over NATS
(batched with all other traffic), writes the Cog-shaped prediction to a results stream and to the
key cohort:result:{id}, calls the webhook, and acks the entry only once the result is written.
${BRIDGE_KNOB_HELP}
${WEBHOOK_HELP}
${NATS_AUTH_HELP}`

/** `cohort bridge <kind>`. */
export async function bridgeCommand(args: string[]): Promise<void> {
  const [kind, ...rest] = args
  if (kind === undefined || kind === '--help' || kind === '-h') {
    console.log(BRIDGE_HELP)
    return
  }
  if (kind !== 'redis') {
    throw new CliError(`unknown bridge "${kind}" (known: redis)`)
  }
  const { values: v } = parse(rest, {
    ...BRIDGE_OPTIONS,
    ...WEBHOOK_OPTIONS,
    ...NATS_AUTH_OPTIONS,
  })
  if (v.help) {
    console.log(BRIDGE_HELP)
    return
  }
  const k = bridgeKnobs(v)
  const consumer = k.consumer ?? `${hostname()}-${process.pid}`
  const redisUrl = k.redis
  const redis = await connectRedis(redisUrl)
  const reader = redis.duplicate()
  const nc = await connectNats(k.nats, 'cohort-bridge', natsAuthOptions(v))
  const transport = createNatsTransport(nc, { ownsConnection: true })
  const webhooks = new WebhookSender({
    ...webhookOptions(v),
    onGiveUp: (p, event, last) => console.error(`cohort: bridge: webhook ${event} of ${p.id} not delivered: ${last}`),
  })
  // The bridge's gateway: one core, as in `cohort gateway` (worker-loss detection, the door).
  const core = createGatewayCore({ transport })
  const bridge = new RedisBridge({
    redis: caller(redis),
    reader: caller(reader),
    door: core.door,
    webhooks,
    consumer,
    stream: k.stream,
    group: k.group,
    results: k.results,
    concurrency: k.concurrency,
    claimIdleMs: k['claim-idle-ms'],
    timeoutMs: k['timeout-ms'],
    log: (m) => console.error(`cohort: bridge: ${m}`),
  })
  await bridge.start()
  let stopping: Promise<void> | undefined
  const stop = (sig: string) => {
    if (stopping) {
      process.exit(1)
    }
    console.error(`cohort: ${sig}, bridge draining (${bridge.inFlight} in flight)...`)
    stopping = (async () => {
      await bridge.stop()
      // Give queued webhook deliveries a moment, then drop their retries.
      await Promise.race([webhooks.idle(), new Promise((r) => setTimeout(r, 5_000))])
      webhooks.close()
      reader.disconnect()
      await redis.quit().catch(() => undefined)
      await core.close()
      await transport.close()
      const s = bridge.stats
      console.error(`cohort: bridge stopped: ${s.succeeded} succeeded, ${s.failed} failed, ${s.duplicates} duplicates, ${s.claimed} claimed`)
    })()
    stopping.then(
      () => process.exit(0),
      (e: unknown) => {
        console.error(`cohort: bridge drain failed: ${e instanceof Error ? e.message : String(e)}`)
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  console.log(`cohort: bridge redis ${redisUrl} stream ${k.stream} group ${k.group} consumer ${consumer} -> NATS ${k.nats}`)
}

/** Connect (retrying in the background later) or fail with one line after 5 s. */
async function connectRedis(url: string): Promise<Redis> {
  const redis = new Redis(url, { maxRetriesPerRequest: null, lazyConnect: true })
  redis.on('error', () => undefined) // reconnects on its own; failed commands are reported where used
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer in 5 s')), 5_000)
      }),
    ])
    await redis.call('PING')
    return redis
  } catch (e) {
    redis.disconnect()
    throw new CliError(`cannot connect to Redis at ${url}: ${e instanceof Error ? e.message : String(e)}`)
  } finally {
    clearTimeout(timer)
  }
}

function caller(r: Redis): RedisCaller {
  return { call: (command, ...args) => r.call(command, ...args) }
}
