// `cohort serve --grpc-port` over a real nats-server: HTTP and gRPC serve ONE gateway core, so the
// process holds one gateway id (one `cohort_gateway_info` series), one heartbeat subscription and
// one acceptance-notice subject on the bus (read from the server's /subsz monitoring endpoint).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

let nats: NatsServerHandle
let serve: CliProcess | undefined
let http = ''

/** The subjects of every subscription the server holds. */
async function subscriptions(): Promise<string[]> {
  const r = await fetch(`${nats.monitorUrl!}/subsz?subs=1&limit=100000`)
  const body = (await r.json()) as { subscriptions_list?: { subject: string }[] }
  return (body.subscriptions_list ?? []).map((s) => s.subject)
}

beforeAll(async () => {
  nats = await startNatsServer({ monitor: true })
  serve = spawnCohort(['serve', '--nats', nats.url, '--model', 'demo', '--threads', '1', '--port', '0', '--grpc-port', '0', '--drain-ms', '0'])
  await serve.waitFor(/grpc on 127\.0\.0\.1:\d+/, 90_000)
  const [, port] = await serve.waitFor(/serving demo on http:\/\/127\.0\.0\.1:(\d+)/, 90_000)
  http = `http://127.0.0.1:${port}`
}, 120_000)

afterAll(async () => {
  await serve?.stop('SIGKILL')
  await ifStarted(nats)?.stop()
})

describe('cohort serve --grpc-port', () => {
  it('runs one gateway: one gateway id, one heartbeat subscription, one acceptance-notice subject', async () => {
    const metrics = await (await fetch(`${http}/metrics`)).text()
    const ids = metrics.split('\n').filter((l) => l.startsWith('cohort_gateway_info{'))
    expect(ids).toHaveLength(1)
    const id = /gateway="([^"]+)"/.exec(ids[0]!)?.[1]
    const subs = await subscriptions()
    expect(subs.filter((s) => s === 'cohort.heartbeat')).toHaveLength(1)
    expect(subs.filter((s) => s.startsWith('cohort.accept.'))).toEqual([`cohort.accept.${id}`])
  })
})
