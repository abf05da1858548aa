// The real `nats` CLI (natscli) against Cohort workers: `nats micro ls / info / stats / ping` must
// list and read them, which checks the $SRV answers against the CLI's own JSON schemas (it drops
// answers that do not validate). Part of the `tools` project (`npm run test:all`), which needs the
// binary: `go install github.com/nats-io/natscli/nats@latest` (`.ci/run` does it).
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { decodeReply, encodeRequest, subjects } from '@cohort/protocol'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const run = promisify(execFile)

/** `$NATS_CLI`, else `nats` on PATH, else `$GOPATH/bin/nats` or `~/go/bin/nats`. */
function findNatsCli(): string {
  const candidates = [
    process.env['NATS_CLI'],
    ...(process.env['PATH'] ?? '').split(delimiter).map((d) => (d ? join(d, 'nats') : undefined)),
    process.env['GOPATH'] ? join(process.env['GOPATH'], 'bin', 'nats') : undefined,
    join(homedir(), 'go', 'bin', 'nats'),
  ]
  const found = candidates.find((c): c is string => !!c && existsSync(c))
  if (!found) {
    throw new Error('the nats CLI is not installed: run `go install github.com/nats-io/natscli/nats@latest` ' + '(bash .ci/run does), or set NATS_CLI to its path')
  }
  return found
}

describe('nats micro (natscli) sees Cohort workers', () => {
  let nats: NatsServerHandle
  let nc: NatsConnection
  let cli: string
  const workers: CliProcess[] = []
  const SENT = 7

  /** Run `nats --server URL --timeout 1s ...args` and return stdout. */
  async function natsCli(...args: string[]): Promise<string> {
    const { stdout } = await run(cli, ['--server', nats.url, '--timeout', '1s', '--no-context', ...args], {
      timeout: 20_000,
      env: { ...process.env, NO_COLOR: '1' },
    })
    return stdout
  }

  beforeAll(async () => {
    cli = findNatsCli()
    nats = await startNatsServer()
    for (const id of ['w1', 'w2']) {
      workers.push(spawnCohort(['worker', '--nats', nats.url, '--id', id, '--predictor', SLEEPY_PREDICTOR], { SLEEPY_MS: '2' }))
    }
    await Promise.all(workers.map((w) => w.waitFor(/serving/, 60_000)))
    nc = await connect({ servers: nats.url })
    const S = subjects()
    for (let i = 0; i < SENT; i++) {
      const req = { v: 1 as const, id: `t${i}`, model: 'sleepy', deadline: Date.now() + 5_000, items: [{ x: i }] }
      const reply = decodeReply((await nc.request(S.infer('sleepy'), encodeRequest(req), { timeout: 5_000 })).data)
      expect(reply.error).toBeUndefined()
    }
  })

  afterAll(async () => {
    await ifStarted(nc)?.close()
    await Promise.all(workers.map((w) => w.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  it('nats micro ls lists both workers', async () => {
    const list = JSON.parse(await natsCli('micro', 'ls', '--json')) as { name: string; id: string; version: string }[]
    expect(list.map((s) => [s.name, s.id, s.version]).sort()).toEqual([
      ['cohort-worker', 'w1', '0.1.0'],
      ['cohort-worker', 'w2', '0.1.0'],
    ])
    const table = await natsCli('micro', 'ls')
    expect(table).toContain('cohort-worker')
    expect(table).toMatch(/w1[\s\S]*w2|w2[\s\S]*w1/)
  })

  it('nats micro info shows the model endpoint of one worker', async () => {
    const out = JSON.parse(await natsCli('micro', 'info', 'cohort-worker', 'w2', '--json')) as {
      info: { id: string; endpoints: { name: string; subject: string; queue_group: string; metadata: Record<string, string> }[] }
      stats: { id: string }
    }
    expect(out.info.id).toBe('w2')
    expect(out.stats.id).toBe('w2')
    expect(out.info.endpoints).toEqual([expect.objectContaining({ name: 'sleepy', subject: 'cohort.infer.sleepy', queue_group: 'cohort.q.sleepy' })])
    expect(out.info.endpoints[0]!.metadata).toMatchObject({ model: 'sleepy', max_batch_size: '64', ready: 'true' })
  })

  it('nats micro stats counts the requests sent', async () => {
    const stats = JSON.parse(await natsCli('micro', 'stats', 'cohort-worker', '--json')) as {
      id: string
      endpoints: { name: string; num_requests: number; num_errors: number; average_processing_time: number }[]
    }[]
    expect(stats.map((s) => s.id).sort()).toEqual(['w1', 'w2'])
    const eps = stats.flatMap((s) => s.endpoints)
    expect(eps.every((e) => e.name === 'sleepy')).toBe(true)
    expect(eps.reduce((a, e) => a + e.num_requests, 0)).toBe(SENT)
    expect(eps.reduce((a, e) => a + e.num_errors, 0)).toBe(0)
    const table = await natsCli('micro', 'stats', 'cohort-worker')
    expect(table).toContain('cohort.q.sleepy')
  })

  it('nats micro ping reaches both workers', async () => {
    const out = await natsCli('micro', 'ping', 'cohort-worker')
    expect(out).toMatch(/cohort-worker w1\s+rtt=/)
    expect(out).toMatch(/cohort-worker w2\s+rtt=/)
  })
})
