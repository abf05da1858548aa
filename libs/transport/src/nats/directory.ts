import type { NatsConnection } from '@nats-io/nats-core'
import { Kvm, type KV } from '@nats-io/kv'
import type { ModelDirectory } from '../types.ts'

/**
 * The {@link ModelDirectory} in a JetStream KV bucket (`<prefix>-models`): workers announce the models
 * they serve, the gateway asks whether a model was ever announced (404 rather than 503). Without
 * JetStream it is empty: `announce` does nothing and `known` answers `undefined`.
 * `replicas`: of the bucket when this process creates it (the first `announce`).
 */
export function createKvDirectory(nc: NatsConnection, bucketName: string, replicas: number): ModelDirectory {
  let kv: Promise<KV | undefined> | undefined
  const bucket = (create: boolean): Promise<KV | undefined> => {
    kv ??= (create ? new Kvm(nc).create(bucketName, { history: 1, replicas }) : new Kvm(nc).open(bucketName)).catch(() => {
      kv = undefined // JetStream off or bucket missing: try again next time.
      return undefined
    })
    return kv
  }
  return {
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
}
