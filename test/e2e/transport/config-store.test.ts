// The NATS transport's runtime configuration store (libs/transport/src/nats/config-store.ts) on a
// real nats-server: get/put/delete, the watch, and no JetStream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { NatsConnection } from '@nats-io/nats-core'
import { Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { CohortError } from '@cohort/protocol'
import { AsyncQueue, type ModelConfig } from '@cohort/transport'
import { startNatsServer, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'
import { createKvConfigStore } from '../../../libs/transport/src/nats/config-store.ts'

let js: NatsServerHandle
let plain: NatsServerHandle
let nc: NatsConnection
let ncPlain: NatsConnection

beforeAll(async () => {
  ;[js, plain] = await Promise.all([startNatsServer(), startNatsServer({ jetstream: false })])
  ;[nc, ncPlain] = await Promise.all([connect({ servers: js.url }), connect({ servers: plain.url })])
})
afterAll(async () => {
  await Promise.all(allStarted(nc, ncPlain).map((c) => c.close().catch(() => undefined)))
  await Promise.all([ifStarted(js)?.stop(), ifStarted(plain)?.stop()])
})

/** The next value a watch reported, within `ms` (a hang guard, not a timing claim). */
async function next(q: AsyncQueue<ModelConfig>, ms = 10_000): Promise<ModelConfig> {
  const it = q[Symbol.asyncIterator]()
  const r = await Promise.race([it.next(), new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no change reported')), ms))])
  return r.value as ModelConfig
}

describe('the KV config store', () => {
  it('stores, reads and deletes a model configuration', async () => {
    const s = createKvConfigStore(nc, 'cfg-a-config', 1)
    expect(await s.get('m')).toBeUndefined()
    await s.put('m', { maxBatchSize: 8 })
    expect(await s.get('m')).toEqual({ maxBatchSize: 8 })
    // Another process's store on the same bucket reads it.
    expect(await createKvConfigStore(nc, 'cfg-a-config', 1).get('m')).toEqual({ maxBatchSize: 8 })
    await s.delete('m')
    expect(await s.get('m')).toBeUndefined()
  })

  it('a watch reports the current value, each change, {} after a delete, survives a bad stored value, and stops', async () => {
    const s = createKvConfigStore(nc, 'cfg-b-config', 1)
    await s.put('m', { maxDelayMs: 1 })
    const seen = new AsyncQueue<ModelConfig>()
    const w = s.watch('m', (v) => seen.push(v))
    expect(await next(seen)).toEqual({ maxDelayMs: 1 })
    await s.put('m', { maxDelayMs: 2 })
    expect(await next(seen)).toEqual({ maxDelayMs: 2 })
    // Not JSON: onChange never sees it, and the watch goes on.
    await (await new Kvm(nc).open('cfg-b-config')).put('m', 'not json')
    await s.put('m', { maxDelayMs: 3 })
    expect(await next(seen)).toEqual({ maxDelayMs: 3 })
    await s.delete('m')
    expect(await next(seen)).toEqual({})
    w.stop()
    await s.put('m', { maxDelayMs: 4 })
    // A second watch sees the put; the stopped one reported nothing more.
    const after = new AsyncQueue<ModelConfig>()
    const w2 = s.watch('m', (v) => after.push(v))
    expect(await next(after)).toEqual({ maxDelayMs: 4 })
    w2.stop()
    seen.end()
    const rest: ModelConfig[] = []
    for await (const v of seen) rest.push(v)
    expect(rest).toEqual([])
  })

  it('without JetStream: get finds nothing, put and delete fail with NOT_READY naming JetStream, a watch never fires', async () => {
    const s = createKvConfigStore(ncPlain, 'cfg-a-config', 1)
    expect(await s.get('m')).toBeUndefined()
    for (const op of [() => s.put('m', { a: 1 }), () => s.delete('m')]) {
      const e = await op().catch((x: unknown) => x)
      expect(e).toBeInstanceOf(CohortError)
      expect((e as CohortError).code).toBe('NOT_READY')
      expect((e as CohortError).message).toContain('JetStream')
    }
    const calls: ModelConfig[] = []
    s.watch('m', (v) => calls.push(v)).stop()
    expect(calls).toEqual([])
  })
})
