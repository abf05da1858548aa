// The worker-loss probes (worker-probe.ts) over an InProcessTransport, where a publication with a
// reply subject to a subject nobody subscribes gets a no-responders message, as over NATS.
import { afterEach, describe, expect, it } from 'vitest'
import { consume, InProcessTransport, type TransportSubscription } from '@cohort/transport'
import { WorkerProbes } from './worker-probe.ts'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) {
    await c()
  }
})

const settle = () => new Promise((r) => setTimeout(r, 5))

function setup() {
  const t = new InProcessTransport()
  let now = 1_000
  const gone: { worker: string; since: number }[] = []
  const probes = new WorkerProbes(t, (worker, _why, since) => gone.push({ worker, since }), { now: () => now })
  cleanups.push(
    () => probes.close(),
    () => t.close(),
  )
  /** A worker answering its instance PING subject; returns the subscription (unsubscribe = kill). */
  const worker = (id: string): TransportSubscription => {
    const sub = t.subscribe(`$SRV.PING.cohort-worker.${id}`)
    void consume(
      sub,
      (m) => void m.respond(new TextEncoder().encode('{}')),
      () => undefined,
    )
    return sub
  }
  return { probes, gone, worker, tick: (ms: number) => (now += ms) }
}

describe('WorkerProbes', () => {
  it('declares a worker that answered before gone after two no-responder answers in a row, with when the first was sent', async () => {
    const { probes, gone, worker, tick } = setup()
    const w = worker('w1')
    probes.seen('w1')
    await settle()
    w.unsubscribe()
    tick(100)
    probes.probe('w1')
    await settle()
    expect(gone).toEqual([])
    tick(250)
    probes.probe('w1')
    await settle()
    expect(gone).toEqual([{ worker: 'w1', since: 1_100 }])
    expect(probes.sent).toBe(3)
  })

  it('never declares a worker gone that never answered a probe (other ids, older workers, no permission)', async () => {
    const { probes, gone } = setup()
    for (let i = 0; i < 5; i++) {
      probes.probe('w2')
      await settle()
    }
    expect(gone).toEqual([])
  })

  it('starts over after an answer between two no-responder answers (a connection that moved)', async () => {
    const { probes, gone, worker } = setup()
    let w = worker('w3')
    probes.probe('w3')
    await settle()
    w.unsubscribe()
    probes.probe('w3')
    await settle()
    w = worker('w3') // reconnected elsewhere
    probes.probe('w3')
    await settle()
    w.unsubscribe()
    probes.probe('w3')
    await settle()
    expect(gone).toEqual([])
  })

  it('keeps one probe in flight per worker, and forgets unanswered ones after timeoutMs', async () => {
    const t = new InProcessTransport()
    let now = 0
    const sent: string[] = []
    const probes = new WorkerProbes(t, () => undefined, { now: () => now, timeoutMs: 1000 })
    cleanups.push(
      () => probes.close(),
      () => t.close(),
    )
    const sub = t.subscribe('$SRV.PING.cohort-worker.w4') // never answers (a worker busy or stuck)
    void consume(
      sub,
      (m) => void sent.push(m.subject),
      () => undefined,
    )
    probes.probe('w4')
    probes.probe('w4')
    await settle()
    expect(sent).toHaveLength(1)
    now = 1001
    probes.sweep()
    probes.probe('w4')
    await settle()
    expect(sent).toHaveLength(2)
    probes.probe('not a token') // no instance subject: never probed
    expect(probes.sent).toBe(2)
  })
})
