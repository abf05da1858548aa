/**
 * `cohort bridge redis`: Redis Streams ingress (see docs/predictions.md#redis-streams-ingress).
 * @module
 */
import { hostname } from 'node:os'
import { Redis } from 'ioredis'
import { createGatewayCore } from '@cohort/gateway'
import { WebhookSender } from '@cohort/predictions'
import { createNatsTransport } from '@cohort/transport'
import { intFlag, parse } from '../args.ts'
import { WEBHOOK_HELP, WEBHOOK_OPTIONS, webhookOptions } from '../jobs-flags.ts'
import { CliError } from '../cli-error.ts'
import { connectNats } from '../connect.ts'
import { NATS_AUTH_HELP, NATS_AUTH_OPTIONS, natsAuthOptions } from '../nats-auth.ts'
import { DEFAULT_BRIDGE_TIMEOUT_MS, RedisBridge, type RedisCaller } from './redis-bridge.ts'

const DEFAULT_REDIS = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
const DEFAULT_NATS = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222'

export const BRIDGE_HELP = `cohort bridge redis [options]
Redis Streams ingress: reads prediction requests (fields id, model, input as JSON, optional webhook)
from a stream with a consumer group, runs each as one item on the model's workers over NATS
(batched with all other traffic), writes the Cog-shaped prediction to a results stream and to the
key cohort:result:{id}, calls the webhook, and acks the entry only once the result is written.
  --redis URL            Redis server (default $REDIS_URL or redis://127.0.0.1:6379)
  --nats URL             NATS server(s), comma-separated (default $NATS_URL or ${DEFAULT_NATS})
  --stream KEY           request stream (default cohort:requests; created with the group if missing)
  --group NAME           consumer group (default cohort)
  --consumer NAME        consumer name, unique per bridge (default <hostname>-<pid>)
  --results KEY          results stream (default cohort:results)
  --concurrency N        entries in flight at once (default 64)
  --claim-idle-ms MS     claim entries pending this long on another consumer, e.g. a bridge that
                         died (default 60000; keep it above the longest prediction)
  --timeout-ms MS        deadline of one entry, retries of transient errors included (default ${DEFAULT_BRIDGE_TIMEOUT_MS})
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
    redis: { type: 'string', default: DEFAULT_REDIS },
    nats: { type: 'string', default: DEFAULT_NATS },
    stream: { type: 'string', default: 'cohort:requests' },
    group: { type: 'string', default: 'cohort' },
    consumer: { type: 'string' },
    results: { type: 'string', default: 'cohort:results' },
    concurrency: { type: 'string' },
    'claim-idle-ms': { type: 'string' },
    'timeout-ms': { type: 'string' },
    ...WEBHOOK_OPTIONS,
    ...NATS_AUTH_OPTIONS,
  })
  if (v.help) {
    console.log(BRIDGE_HELP)
    return
  }
  const concurrency = intFlag('concurrency', v['concurrency']) ?? 64
  const claimIdleMs = intFlag('claim-idle-ms', v['claim-idle-ms']) ?? 60_000
  const timeoutMs = intFlag('timeout-ms', v['timeout-ms']) ?? DEFAULT_BRIDGE_TIMEOUT_MS
  const consumer = (v['consumer'] as string | undefined) ?? `${hostname()}-${process.pid}`
  const redisUrl = v['redis'] as string
  const redis = await connectRedis(redisUrl)
  const reader = redis.duplicate()
  const nc = await connectNats(v['nats'] as string, 'cohort-bridge', natsAuthOptions(v))
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
    stream: v['stream'] as string,
    group: v['group'] as string,
    results: v['results'] as string,
    concurrency,
    claimIdleMs,
    timeoutMs,
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
  console.log(
    `cohort: bridge redis ${redisUrl} stream ${v['stream'] as string} group ${v['group'] as string} consumer ${consumer} -> NATS ${v['nats'] as string}`,
  )
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
