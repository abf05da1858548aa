import type { NatsConnection } from '@nats-io/nats-core'
import { Kvm, type KV } from '@nats-io/kv'
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
      return e && e.operation === 'PUT' ? (e.json() as ModelConfig) : undefined
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
          if (e.operation === 'PUT' || e.operation === 'DEL' || e.operation === 'PURGE') {
            try {
              onChange(e.operation === 'PUT' ? (e.json() as ModelConfig) : {})
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
}
