// The generative APIs over real NATS: nats-server, two worker processes and a gateway process; plus
// what happens to streams when a worker is killed or the gateway goes away.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'
import { CHAR_GENERATOR, defineGenerativeSuite, post, running, sseData, states, until } from './generative-suite.ts'

interface Cluster {
  nats: NatsServerHandle
  workers: CliProcess[]
  gateway: CliProcess
  baseUrl: string
  stateDir: string
  metricsUrls: string[]
  close(): Promise<void>
}

async function startCluster(stepMs = 5): Promise<Cluster> {
  const stateDir = mkdtempSync(join(tmpdir(), 'cohort-gen-'))
  const nats = await startNatsServer()
  const workers: CliProcess[] = []
  for (const id of ['w1', 'w2']) {
    const w = spawnCohort(
      ['worker', '--nats', nats.url, '--id', id, '--threads', '1', '--heartbeat-ms', '250', '--generative', `chars=${CHAR_GENERATOR}`, '--model', 'demo', '--metrics-port', '0'],
      { CHARGEN_STATE: join(stateDir, `${id}.json`), CHARGEN_STEP_MS: String(stepMs) },
    )
    workers.push(w)
  }
  await Promise.all(workers.map((w) => w.waitFor(/serving/, 90_000)))
  const metricsUrls = await Promise.all(workers.map(async (w) => (await w.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/, 30_000))[1]!))
  const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  return {
    nats,
    workers,
    gateway,
    baseUrl: `http://127.0.0.1:${port}`,
    stateDir,
    metricsUrls,
    async close() {
      await Promise.all([...workers, gateway].map((p) => p.stop('SIGKILL')))
      await nats.stop()
    },
  }
}

defineGenerativeSuite('generative APIs over NATS (gateway + 2 worker processes)', () => startCluster())

/** Start `n` long streams (they only end when cancelled or cut); resolves once each has begun. */
async function longStreams(baseUrl: string, n: number) {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await post(baseUrl, '/v1/completions', { model: 'chars', prompt: `stream ${i}`, max_tokens: 8000, ignore_eos: true, stream: true })
      expect(r.status).toBe(200)
      return r
    }),
  )
}

describe('generative streams over NATS when a process goes away', () => {
  let c: Cluster
  beforeAll(async () => {
    // Slower steps: these streams run until cut, and the machine is shared.
    c = await startCluster(20)
  }, 120_000)
  afterAll(async () => {
    await c?.close()
  })

  it('a killed worker ends its streams with a retryable WORKER_LOST error event; the other worker\'s streams go on', async () => {
    const streams = await longStreams(c.baseUrl, 6)
    await until(() => running(c.stateDir) === 6, 'all six sequences to run')
    const w1 = states(c.stateDir).find((s) => s.pid !== 0 && s.running > 0)!
    const victim = c.workers.find((w) => w.proc.pid === w1.pid)
    expect(victim).toBeDefined()
    const onVictim = w1.running
    await victim!.stop('SIGKILL')
    rmSync(w1.file) // a dead process's count no longer counts
    // Every stream on the killed worker ends (nothing hangs) with the error as its last event; the
    // others keep streaming, so they are read only until the victim's have ended.
    let seen = 0
    const log: string[] = []
    const ended = await Promise.all(
      streams.map(async (r) => {
        const reader = r.body!.getReader()
        const dec = new TextDecoder()
        let text = ''
        const deadline = Date.now() + 30_000
        while (seen < onVictim && Date.now() < deadline) {
          // Bounded: a stream that neither errors nor moves fails the test below instead of hanging it.
          const next = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(() => r(undefined), 15_000))])
          if (next === undefined) {
            text += '<stalled 15 s>'
            break
          }
          const { value, done } = next
          if (done) break
          text += dec.decode(value, { stream: true })
          if (text.includes('"error"')) {
            seen++
            break
          }
        }
        await reader.cancel().catch(() => undefined)
        const err = /data: (\{"error".*\})\n\n/.exec(text)?.[1]
        log.push(`${text.length} chars, ends ${JSON.stringify(text.slice(-160))}`)
        return err ? (JSON.parse(err) as { error: { code: string; message: string } }) : undefined
      }),
    )
    const errors = ended.filter((e) => e !== undefined)
    expect(errors, `victim ${w1.pid} ran ${onVictim}; streams ${log.join('\n')}; states ${JSON.stringify(states(c.stateDir))}; gateway:\n${c.gateway.output().slice(-3000)}`).toHaveLength(onVictim)
    for (const e of errors) {
      expect(e!.error.code).toBe('WORKER_LOST')
      expect(e!.error.message).toMatch(/retry/)
    }
    // The survivor's streams were cancelled by the reads above: its slots are freed too.
    await until(() => states(c.stateDir).filter((s) => s.pid !== w1.pid).every((s) => s.running === 0), 'the survivor\'s cancelled streams to leave')
  })

  it('a gateway that goes away frees its streams\' slots on the workers', async () => {
    const streams = await longStreams(c.baseUrl, 3)
    await until(() => running(c.stateDir) >= 3, 'the sequences to run')
    await c.gateway.stop('SIGKILL')
    for (const r of streams) {
      await r.text().catch(() => undefined)
    }
    // No client cancel reached the workers (the gateway died): their probe of its inbox did.
    await until(() => running(c.stateDir) === 0, 'the dead gateway\'s sequences to leave the generators')
    expect(c.workers.map((w) => w.output()).join('\n')).toMatch(/the gateway of these generations went away; cancelling them/)
    const c2 = spawnCohort(['gateway', '--nats', c.nats.url, '--port', '0'])
    c.gateway = c2
    const [, port] = await c2.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    // A new gateway is served at once by the same workers.
    const r = await post(`http://127.0.0.1:${port}`, '/v1/completions', { model: 'chars', prompt: 'again', max_tokens: 5, ignore_eos: true, stream: true })
    const data = await sseData(r)
    expect(data.at(-1)).toBe('[DONE]')
  })
})
