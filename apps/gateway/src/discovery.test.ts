// Discovery apart from the send path (discovery.ts), over the in-process transport with
// hand-written responders: the cohort.discover merge and the $SRV filters. GET /v2/workers and
// readiness through the app, with real workers: workers.test.ts.
import { afterEach, describe, expect, it } from 'vitest'
import { encodeValue, subjects, type ModelMeta } from '@cohort/protocol'
import { InProcessTransport, type TransportSubscription } from '@cohort/transport'
import { Discovery } from './discovery.ts'

const subj = subjects()
const enc = new TextEncoder()
const subs: TransportSubscription[] = []
let transport = new InProcessTransport()
afterEach(async () => {
  for (const s of subs.splice(0)) s.unsubscribe()
  await transport.close()
  transport = new InProcessTransport()
})

/** A responder on `subject` answering `body` (bytes as they are). */
function answer(subject: string, body: Uint8Array): void {
  const sub = transport.subscribe(subject)
  subs.push(sub)
  void (async () => {
    for await (const m of sub) m.respond(body)
  })()
}

const meta = (name: string, versions: string[], ready: boolean) => ({ name, versions, ready, inputs: [], outputs: [] }) as unknown as ModelMeta

describe('Discovery', () => {
  it('discover merges the models of every worker by name (versions joined, ready if any worker is), skipping unreadable answers', async () => {
    answer(subj.discover(), encodeValue({ worker: 'a', models: [meta('m', ['1'], false), meta('b', ['1'], true)] }))
    answer(subj.discover(), encodeValue({ worker: 'b', models: [meta('m', ['2'], true), { versions: ['x'] }] }))
    answer(subj.discover(), enc.encode('not msgpack at all \u0000'))
    const d = await new Discovery(transport, subj, 100).discover()
    expect(d.workers).toBe(3)
    expect(d.models.map((m) => [m.name, m.versions, m.ready])).toEqual([
      ['b', ['1'], true],
      ['m', ['2', '1'], true],
    ])
  })

  it('services keeps only cohort-worker answers of this subject prefix, sorted by id', async () => {
    const info = (id: string, extra: Record<string, unknown>) =>
      enc.encode(JSON.stringify({ type: 'io.nats.micro.v1.info_response', name: 'cohort-worker', id, version: '1', endpoints: [{ name: 'm' }, { nope: 1 }], ...extra }))
    answer('$SRV.INFO.cohort-worker', info('w2', { metadata: { subject_prefix: 'cohort' } }))
    answer('$SRV.INFO.cohort-worker', info('w1', {}))
    answer('$SRV.INFO.cohort-worker', info('other-deployment', { metadata: { subject_prefix: 'acme' } }))
    answer('$SRV.INFO.cohort-worker', info('x', { name: 'another-service' }))
    answer('$SRV.INFO.cohort-worker', enc.encode('{not json'))
    const got = await new Discovery(transport, subj, 100).services('INFO')
    expect(got.map((s) => s.id)).toEqual(['w1', 'w2'])
    expect(got[0]?.endpoints).toEqual([{ name: 'm' }])
  })

  it('readiness leaves draining workers out and needs a ready worker for every model', async () => {
    const info = (id: string, state: string, ready: string) =>
      enc.encode(
        JSON.stringify({
          type: 'io.nats.micro.v1.info_response',
          name: 'cohort-worker',
          id,
          version: '1',
          metadata: { state },
          endpoints: [{ name: 'm', metadata: { model: 'm', ready } }],
        }),
      )
    answer('$SRV.INFO.cohort-worker', info('w1', 'draining', 'true'))
    answer('$SRV.INFO.cohort-worker', info('w2', 'serving', 'false'))
    expect(await new Discovery(transport, subj, 100).readiness()).toEqual({ ready: false, models: 1, workers: 1 })
  })
})
