import type { NatsConnection } from '@nats-io/nats-core'
import { Kvm, type KV, type KvEntry } from '@nats-io/kv'
import { CohortError } from '@cohort/protocol'
import type { ConfigStore, ModelConfig } from '../types.ts'

/**
 * The {@link ConfigStore} in a JetStream KV bucket (`<prefix>-config`, created on first use with
 * `replicas`): each model's runtime configuration as JSON, and a watch per model. Without JetStream,
 * `get` answers `undefined`, `put` and `delete` throw NOT_READY and a watch never fires.
 */
export function createKvConfigStore(nc: NatsConnection, bucketName: string, replicas: number): ConfigStore {
  let cfg: Promise<KV | undefined> | undefined
  const configBucket = (): Promise<KV | undefined> => {
    cfg ??= new Kvm(nc).create(bucketName, { history: 1, replicas }).catch(() => {
      cfg = undefined
      return undefined
    })
    return cfg
  }
  return {
    async get(model) {
      const b = await configBucket()
      const e = await b?.get(model).catch(() => null)
      return e && e.operation === 'PUT' ? e.json<ModelConfig>() : undefined
    },
    async put(model, value) {
      const b = await configBucket()
      if (!b) {
        throw new CohortError('NOT_READY', 'runtime configuration needs NATS JetStream (start nats-server with -js)')
      }
      await b.put(model, JSON.stringify(value))
    },
    async delete(model) {
      const b = await configBucket()
      if (!b) {
        throw new CohortError('NOT_READY', 'runtime configuration needs NATS JetStream (start nats-server with -js)')
      }
      await b.delete(model)
    },
    watch(model, onChange) {
      let stopped = false
      // Read through a call: stop() sets it during the awaits below (TypeScript keeps a narrowing across them).
      const isStopped = (): boolean => stopped
      let iter: { stop(): void } | undefined
      void (async () => {
        const b = await configBucket()
        if (!b || isStopped()) {
          return
        }
        const w = await b.watch({ key: model }).catch(() => undefined)
        if (!w) {
          return
        }
        iter = w
        if (isStopped()) {
          w.stop()
          return
        }
        for await (const e of w) {
          try {
            const c = configOf(e.operation, e)
            if (c !== undefined) {
              onChange(c)
            }
          } catch {
            // A bad stored value must not end the watch.
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
}

/**
 * The configuration a watched entry sets: its JSON on PUT, `{}` on DEL or PURGE, undefined for any
 * other operation (the server's KV-Operation header: any string, whatever the library's type says).
 */
function configOf(operation: string, e: KvEntry): ModelConfig | undefined {
  if (operation === 'PUT') {
    return e.json<ModelConfig>()
  }
  return operation === 'DEL' || operation === 'PURGE' ? {} : undefined
}
