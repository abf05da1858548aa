// Durable async jobs (NATS JetStream, real processes) through a sustained overload: a `cohort
// worker` with a 3-delivery budget (--job-max-deliver 3) and a queue of 2 items is kept full by a
// flood of sync requests for FLOOD_S seconds, several times longer than 3 deliveries x the 1 s wait
// before a refused job comes back. Its jobs are refused OVERLOADED again and again meanwhile; every
// one must still end `succeeded`, run exactly once (the sleepy predictor's batch log), with the stream
// drained (nothing lost, nothing left unacked). Before refusals were counted apart (docs/reliability.md
// #async-jobs-under-overload) each refusal used up a delivery and these jobs ended failed unrun.
// The test checks the overload really happened: some job was refused more often than the budget.
// Project "flood" (FLOOD_S=8); the nightly project runs it for a minute (JOBS_FLOOD_SECONDS=60).
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { jobNames } from '@cohort/transport'
import {
  SLEEPY_PREDICTOR,
  getJson,
  sleepyLogPath,
  sleepyRuns,
  spawnCohort,
  startNatsServer,
  type CliProcess,
  type JsonBody,
  type NatsServerHandle,
  ifStarted,
} from '@cohort/test-support'

const FLOOD_S = Number(process.env['JOBS_FLOOD_SECONDS'] ?? 8)
const MAX_DELIVER = 3
const JOBS = 24
const FLOOD_CLIENTS = 24
const LOG = sleepyLogPath()
const procs: CliProcess[] = []
let nats: NatsServerHandle
let nc: NatsConnection
let url = ''

async function until<T>(f: () => Promise<T | undefined | false>, ms: number): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f().catch(() => undefined)
    if (v !== undefined && v !== false) {
      return v
    }
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 200))
  }
}

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: true })
  nc = await connect({ servers: nats.url })
  const w = spawnCohort(
    [
      'worker',
      '--nats',
      nats.url,
      '--id',
      'jobs-flood',
      '--predictor',
      SLEEPY_PREDICTOR,
      '--max-batch-size',
      '4',
      '--max-queue',
      '2',
      '--job-max-deliver',
      String(MAX_DELIVER),
      '--job-ack-wait-ms',
      '5000',
      '--log-level',
      'error',
    ],
    { SLEEPY_MS: '40', SLEEPY_LOG: LOG },
  )
  procs.push(w)
  await w.waitFor(/worker jobs-flood serving/)
  const g = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0', '--log-level', 'error'])
  procs.push(g)
  url = (await g.waitFor(/gateway on (http:\/\/\S+)/))[1]!
}, 60_000)

afterAll(async () => {
  for (const p of procs) {
    await p.stop('SIGKILL').catch(() => undefined)
  }
  await ifStarted(nc)?.close()
  await ifStarted(nats)?.stop()
})

/** Sync requests back to back from `clients` loops until `endAt`; counts the answers by status. */
async function flood(endAt: number, clients: number): Promise<Map<number, number>> {
  const codes = new Map<number, number>()
  let x = 100_000
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (Date.now() < endAt) {
        const r = await fetch(`${url}/models/sleepy/predictions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': '5000' },
          body: JSON.stringify({ input: { x: x++ } }),
        }).catch(() => undefined)
        await r?.arrayBuffer().catch(() => undefined)
        codes.set(r?.status ?? 0, (codes.get(r?.status ?? 0) ?? 0) + 1)
      }
    }),
  )
  return codes
}

async function settled(): Promise<boolean> {
  const ci = await (await jetstreamManager(nc)).consumers.info(jobNames().stream, 'jobs-sleepy')
  return ci.num_ack_pending === 0 && ci.num_pending === 0
}

describe('durable jobs under a sustained overload', () => {
  it(`every job completes exactly once through ${FLOOD_S} s of overload with a budget of ${MAX_DELIVER} deliveries`, async () => {
    const endAt = Date.now() + FLOOD_S * 1000
    const flooding = flood(endAt, FLOOD_CLIENTS)
    // Let the flood fill the queue first, then submit the jobs into it.
    await new Promise((r) => setTimeout(r, 500))
    const ids = Array.from({ length: JOBS }, (_, i) => `flood-${i + 1}`)
    const put = await Promise.all(
      ids.map(async (id, i) => {
        const r = await fetch(`${url}/models/sleepy/predictions/${id}`, {
          method: 'PUT',
          headers: { 'content-type': 'application/json', prefer: 'respond-async' },
          body: JSON.stringify({ input: { x: i + 1 } }),
        })
        return r.status
      }),
    )
    expect(put).toEqual(ids.map(() => 202))
    const codes = await flooding
    expect(codes.get(503) ?? 0, `the flood was refused (overload): ${JSON.stringify([...codes])}`).toBeGreaterThan(0)
    const records = await until(
      async () => {
        const rs = await Promise.all(ids.map(async (id) => (await getJson(`${url}/predictions/${id}`)).body))
        return rs.every((r) => ['succeeded', 'failed', 'canceled'].includes(r.status)) ? rs : undefined
      },
      60_000 + FLOOD_S * 1000,
    )
    const summary = records.map((r: JsonBody) => `${r.id}:${r.status}:${r.code ?? ''}:a${r.attempts}:d${r.deferrals ?? 0}`).join(' ')
    expect(
      records.map((r: JsonBody) => r.status),
      summary,
    ).toEqual(ids.map(() => 'succeeded'))
    expect(records.map((r: JsonBody) => r.output.y)).toEqual(ids.map((_, i) => 2 * (i + 1)))
    const runs = sleepyRuns(LOG)
    expect(
      ids.map((_, i) => runs.get(i + 1)),
      'each job ran exactly once',
    ).toEqual(ids.map(() => 1))
    expect(Math.max(...records.map((r: JsonBody) => Number(r.deferrals ?? 0))), `some job was refused more often than the budget: ${summary}`).toBeGreaterThan(MAX_DELIVER)
    await until(settled, 30_000)
  })
})
