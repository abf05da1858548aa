// Fair shares between tenants across processes over a real nats-server: a `cohort worker` child
// process serves the `busy` fixture (batches of up to 4, one at a time); an in-process gateway with
// three API keys forwards each key as the envelope's tenant. A gate item (the fixture waits on a
// file) holds the worker's only batch slot, so the queue is built while nothing runs: one key
// floods past its tenant bound (the rest is refused 503 OVERLOADED at once), the other sends one
// request behind the 48 queued. Once the gate opens, the quiet key's request is answered within
// the first two batches; first in, first out it would wait behind 12 batches of the flood. The
// order of the answers is what is asserted (the worker answers batch by batch on one connection),
// no latency or rate.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { createApp } from '@cohort/gateway'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { BUSY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import type { Hono } from 'hono'

let nats: NatsServerHandle
let nc: NatsConnection
let gt: Transport
let worker: CliProcess
let app: Hono
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }
const gateFile = join(mkdtempSync(join(tmpdir(), 'cohort-fair-')), 'open')
const TENANT_BOUND = 48

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  worker = spawnCohort(
    [
      'worker',
      '--nats',
      nats.url,
      '--id',
      'fair',
      '--threads',
      '1',
      '--max-batch-size',
      '4',
      '--max-tenant-queue',
      String(TENANT_BOUND),
      '--batch-timeout-ms',
      '0',
      '--predictor',
      BUSY_PREDICTOR,
    ],
    { BUSY_GATE: gateFile },
  )
  await worker.waitFor(/worker fair serving busy/, 60_000)
  nc = await connect({ servers: nats.url })
  gt = createNatsTransport(nc)
  app = createApp({ transport: gt, apiKeys: ['flood-key', 'quiet-key', 'gate-key'], metaTimeoutMs: 2_000, logger: quiet, workerLoss: false })
}, 90_000)

afterAll(async () => {
  writeFileSync(gateFile, '')
  await ifStarted(worker)?.stop('SIGTERM', 10_000)
  await ifStarted(gt)?.close()
  await ifStarted(nc)?.close()
  await ifStarted(nats)?.stop()
})

const predict = async (key: string, input: Record<string, unknown>) => {
  const r = await app.request('/models/busy/predictions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-cohort-timeout-ms': '60000' },
    body: JSON.stringify({ input }),
  })
  return { status: r.status, code: r.status === 200 ? 'OK' : ((await r.json()) as { code: string }).code }
}

/** Items the worker holds queued and running (its `$SRV.STATS`). */
async function held(): Promise<{ queued: number; running: number }> {
  const m = await nc.request('$SRV.STATS.cohort-worker.fair', new Uint8Array(0), { timeout: 10_000 })
  return m.json<{ endpoints: { data: { queued: number; running: number } }[] }>().endpoints[0]!.data
}
const queued = async () => (await held()).queued

async function until(ok: () => Promise<boolean>, what: string): Promise<void> {
  for (const end = Date.now() + 30_000; !(await ok()); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
  }
}

describe('tenant fairness over NATS (cross-process)', () => {
  it('a flood from one API key is refused at its tenant bound while the other key is served ahead of the flood', async () => {
    // Warm the cost model so admission judges (5 batches).
    for (let i = 0; i < 6; i++) expect((await predict('quiet-key', { x: i })).status).toBe(200)
    const order: string[] = [] // who was answered, in the order the answers came
    const blocker = predict('gate-key', { x: 0, gate: true })
    // The gate item runs alone (nothing else is queued behind it yet).
    await until(async () => (await held()).running === 1, 'the gate batch to start')
    const flood = Array.from({ length: TENANT_BOUND + 8 }, (_, k) =>
      predict('flood-key', { x: 1000 + k }).then((o) => {
        order.push(o.code === 'OK' ? 'flood' : `flood ${o.code}`)
        return o
      }),
    )
    await until(async () => (await queued()) === TENANT_BOUND && order.length === 8, 'the flood to fill its tenant bound')
    // Beyond its bound the flood was refused at once (503, retryable), while nothing ran.
    expect(order).toEqual(Array(8).fill('flood OVERLOADED'))
    const quietOne = predict('quiet-key', { x: 7 }).then((o) => {
      order.push(o.code === 'OK' ? 'quiet' : `quiet ${o.code}`)
      return o
    })
    await until(async () => (await queued()) === TENANT_BOUND + 1, 'the quiet request to queue')
    writeFileSync(gateFile, '')
    expect((await blocker).status).toBe(200)
    expect((await quietOne).status).toBe(200)
    const floods = await Promise.all(flood)
    expect(floods.filter((o) => o.status === 200)).toHaveLength(TENANT_BOUND)
    // The quiet request came out within the first two batches (8 items) after the gate: at most 7
    // flood items were answered before it, not the 48 queued ahead of it.
    const servedBefore = order.slice(8).indexOf('quiet')
    expect(servedBefore, order.join(',')).toBeGreaterThanOrEqual(0)
    expect(servedBefore, order.join(',')).toBeLessThanOrEqual(7)
  }, 120_000)
})
