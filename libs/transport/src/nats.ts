import type { Msg, NatsConnection } from '@nats-io/nats-core'
import { NoRespondersError, RequestError, TimeoutError } from '@nats-io/nats-core'
import { Kvm, type KV } from '@nats-io/kv'
import { CohortError } from '@cohort/protocol'
import type {
  ConfigStore,
  ModelConfig,
  ModelDirectory,
  RequestOptions,
  SubscribeOptions,
  Transport,
  TransportMessage,
  TransportSubscription,
} from './types.ts'

/** KV bucket where workers announce the models they serve. */
export const MODELS_BUCKET = 'cohort-models'

/** KV bucket holding each model's runtime configuration. */
export const CONFIG_BUCKET = 'cohort-config'

/** Default NATS max_payload when the server did not say (1 MiB). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024

function mapRequestError(e: unknown, subject: string, timeoutMs: number): CohortError {
  if (e instanceof CohortError) {
    return e
  }
  const cause = e instanceof Error ? e.cause : undefined
  if (
    e instanceof NoRespondersError ||
    cause instanceof NoRespondersError ||
    (e instanceof RequestError && e.isNoResponders())
  ) {
    return new CohortError('NO_WORKER', `no responders on ${subject}`, { cause: e })
  }
  if (e instanceof TimeoutError || cause instanceof TimeoutError) {
    return new CohortError('DEADLINE_EXCEEDED', `no reply on ${subject} within ${timeoutMs} ms`, { cause: e })
  }
  const msg = e instanceof Error ? e.message : String(e)
  if (/max_payload/i.test(msg)) {
    return new CohortError('PAYLOAD_TOO_LARGE', msg, { cause: e })
  }
  return new CohortError('NO_WORKER', `NATS request failed: ${msg}`, { cause: e })
}

/**
 * A {@link Transport} over a NATS connection. Works with nats-server 2.9.10 and newer.
 * The connection stays owned by the caller unless `ownsConnection` is set.
 */
export function createNatsTransport(nc: NatsConnection, opts: { ownsConnection?: boolean } = {}): Transport {
  let kv: Promise<KV | undefined> | undefined
  const bucket = (create: boolean): Promise<KV | undefined> => {
    kv ??= (create ? new Kvm(nc).create(MODELS_BUCKET, { history: 1 }) : new Kvm(nc).open(MODELS_BUCKET)).catch(
      () => {
        kv = undefined // JetStream off or bucket missing: try again next time.
        return undefined
      },
    )
    return kv
  }
  const directory: ModelDirectory = {
    announce: async (model, info) => {
      const b = await bucket(true)
      await b?.put(model, info).catch(() => undefined)
    },
    known: async (model) => {
      const b = await bucket(false)
      if (!b) {
        return undefined
      }
      const e = await b.get(model).catch(() => null)
      return e !== null && e.operation === 'PUT'
    },
  }
  let cfg: Promise<KV | undefined> | undefined
  const configBucket = (): Promise<KV | undefined> => {
    cfg ??= new Kvm(nc).create(CONFIG_BUCKET, { history: 1 }).catch(() => {
      cfg = undefined
      return undefined
    })
    return cfg
  }
  const config: ConfigStore = {
    async get(model) {
      const b = await configBucket()
      const e = await b?.get(model).catch(() => null)
      return e && e.operation === 'PUT' ? (e.json() as ModelConfig) : undefined
    },
    async put(model, value) {
      const b = await configBucket()
      if (!b) {
        throw new CohortError('NOT_READY', 'runtime configuration needs NATS JetStream (start nats-server with -js)')
      }
      await b.put(model, JSON.stringify(value))
    },
    watch(model, onChange) {
      let stopped = false
      let iter: { stop(): void } | undefined
      void (async () => {
        const b = await configBucket()
        if (!b || stopped) {
          return
        }
        const w = await b.watch({ key: model }).catch(() => undefined)
        if (!w) {
          return
        }
        iter = w
        if (stopped) {
          w.stop()
          return
        }
        for await (const e of w) {
          if (e.operation === 'PUT') {
            try {
              onChange(e.json() as ModelConfig)
            } catch {
              // A bad stored value must not end the watch.
            }
          }
        }
      })()
      return {
        stop: () => {
          stopped = true
          iter?.stop()
        },
      }
    },
  }
  let closing: Promise<void> | undefined
  return {
    config,
    get maxPayload() {
      return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD
    },
    directory,
    async request(subject, data, o: RequestOptions) {
      const max = nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD
      if (data.byteLength > max) {
        throw new CohortError(
          'PAYLOAD_TOO_LARGE',
          `encoded request of ${data.byteLength} bytes exceeds the NATS max_payload of ${max} bytes`,
        )
      }
      if (o.signal?.aborted) {
        throw new CohortError('CANCELLED', 'request aborted')
      }
      const p = nc.request(subject, data, { timeout: Math.max(1, o.timeoutMs) })
      let onAbort: (() => void) | undefined
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(new CohortError('CANCELLED', 'request aborted'))
        o.signal?.addEventListener('abort', onAbort, { once: true })
      })
      try {
        const m = await (o.signal ? Promise.race([p, aborted]) : p)
        return m.data
      } catch (e) {
        throw mapRequestError(e, subject, o.timeoutMs)
      } finally {
        p.catch(() => undefined)
        aborted.catch(() => undefined)
        if (onAbort) {
          o.signal?.removeEventListener('abort', onAbort)
        }
      }
    },
    async requestAll(subject, data, o) {
      const out: Uint8Array[] = []
      try {
        const it = await nc.requestMany(subject, data, { maxWait: o.timeoutMs })
        for await (const m of it) {
          if (m.data.byteLength > 0) {
            out.push(m.data)
          }
        }
      } catch {
        // No responders or timeout: whatever arrived is the answer.
      }
      return out
    },
    publish(subject, data) {
      nc.publish(subject, data)
    },
    subscribe(subject, so: SubscribeOptions = {}): TransportSubscription {
      const sub = nc.subscribe(subject, so.queue ? { queue: so.queue } : {})
      async function* iterate(): AsyncGenerator<TransportMessage> {
        for await (const m of sub) {
          yield wrap(m)
        }
      }
      return {
        [Symbol.asyncIterator]: iterate,
        unsubscribe: () => sub.unsubscribe(),
        drain: () => sub.drain(),
      }
    },
    close() {
      closing ??= opts.ownsConnection && !nc.isClosed() ? nc.drain().catch(() => undefined) : Promise.resolve()
      return closing
    },
  }
}

function wrap(m: Msg): TransportMessage {
  return {
    subject: m.subject,
    data: m.data,
    respond: (d) => m.respond(d),
  }
}
