// The generative APIs over real NATS: nats-server, two worker processes and a gateway process; plus
// what happens to streams when a worker is killed, the gateway goes away or the gateway is paused.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect } from '@nats-io/transport-node'
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

async function startCluster(stepMs = 5, workerFlags: string[] = [], o: { workers?: number; env?: Record<string, string> } = {}): Promise<Cluster> {
  const stateDir = mkdtempSync(join(tmpdir(), 'cohort-gen-'))
  const nats = await startNatsServer()
  const workers: CliProcess[] = []
  for (const id of ['w1', 'w2'].slice(0, o.workers ?? 2)) {
    const w = spawnCohort(
      ['worker', '--nats', nats.url, '--id', id, '--threads', '1', '--heartbeat-ms', '250', '--generative', `chars=${CHAR_GENERATOR}`, '--model', 'demo', '--metrics-port', '0', ...workerFlags],
      { CHARGEN_STATE: join(stateDir, `${id}.json`), CHARGEN_STEP_MS: String(stepMs), ...o.env },
    )
    workers.push(w)
  }
  await Promise.all(workers.map((w) => w.waitFor(/serving/, 90_000)))
  const metricsUrls = await Promise.all(workers.map(async (w) => (await w.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/, 30_000))[1]!))
  const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  const cluster: Cluster = {
    nats,
    workers,
    gateway,
    baseUrl: `http://127.0.0.1:${port}`,
    stateDir,
    metricsUrls,
    async close() {
      // The processes the cluster has now: a test may have replaced its gateway (c.gateway = ...).
      await Promise.all([...cluster.workers, cluster.gateway].map((p) => p.stop('SIGKILL')))
      await nats.stop()
    },
  }
  return cluster
}

defineGenerativeSuite('generative APIs over NATS (gateway + 2 worker processes)', () => startCluster())

/** Start `n` long streams (they only end when cancelled or cut); resolves once each has begun. */
async function longStreams(baseUrl: string, n: number, first = 0) {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await post(baseUrl, '/v1/completions', { model: 'chars', prompt: `stream ${first + i}`, max_tokens: 8000, ignore_eos: true, stream: true })
      expect(r.status).toBe(200)
      return r
    }),
  )
}

/**
 * At least `n` long streams, running on both workers: one at a time, each in its own pack (placed
 * by the NATS queue group), until both run some. Requests sent together share one pack and so one
 * worker.
 */
async function streamsOnBoth(c: Cluster, n: number): Promise<Response[]> {
  const base = running(c.stateDir)
  const streams: Response[] = []
  while (streams.length < n || states(c.stateDir).filter((s) => s.running > 0).length < 2) {
    expect(streams.length, `every stream went to one worker: ${JSON.stringify(states(c.stateDir))}`).toBeLessThan(40)
    streams.push(...(await longStreams(c.baseUrl, 1, streams.length)))
    await until(() => running(c.stateDir) === base + streams.length, 'the new sequence to run')
  }
  return streams
}

/** Read each stream until it ends with an error event or `stop()` says so; its error, if any. */
async function readUntilError(r: Response, stop: () => boolean, log: string[]) {
  const reader = r.body!.getReader()
  const dec = new TextDecoder()
  let text = ''
  const deadline = Date.now() + 30_000
  while (!stop() && Date.now() < deadline) {
    // Bounded: a stream that neither errors nor moves fails the test instead of hanging it.
    const next = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(() => r(undefined), 15_000))])
    if (next === undefined) {
      text += '<stalled 15 s>'
      break
    }
    const { value, done } = next
    if (done) break
    text += dec.decode(value, { stream: true })
    if (/data: \{"error".*\}\n\n/.test(text)) break
  }
  await reader.cancel().catch(() => undefined)
  log.push(`${text.length} chars, ends ${JSON.stringify(text.slice(-160))}`)
  const err = /data: (\{"error".*\})\n\n/.exec(text)?.[1]
  return err ? (JSON.parse(err) as { error: { code: string; message: string } }) : undefined
}

/** The gateway's id (its inbox is `cohort.gw.<id>`), from its /metrics. */
async function gatewayId(baseUrl: string): Promise<string> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text()
  const id = /cohort_gateway_info\{gateway="([^"]+)"\}/.exec(text)?.[1]
  expect(id, 'cohort_gateway_info in /metrics').toBeDefined()
  return id!
}

/** Resolves once NATS answers a publication on `subject` with no-responders (nobody subscribes). */
async function noSubscriber(url: string, subject: string): Promise<void> {
  const nc = await connect({ servers: url })
  try {
    for (let i = 0; ; i++) {
      const gone = await nc.request(subject, new Uint8Array(0), { timeout: 500 }).then(
        () => false,
        (e: unknown) => /no responders/i.test(String((e as Error)?.message)) || (e as { isNoResponders?: () => boolean })?.isNoResponders?.() === true,
      )
      if (gone) return
      if (i > 60) throw new Error(`${subject} still has a subscriber`)
    }
  } finally {
    await nc.close()
  }
}

describe('generative streams over NATS when a process goes away', () => {
  let c: Cluster
  beforeAll(async () => {
    // Slower steps: these streams run until cut, and the machine is shared. No slow probe of the
    // gateways (--generation-probe-ms 0): only the per-step tokens messages can notice one gone.
    c = await startCluster(20, ['--generation-probe-ms', '0'])
  }, 120_000)
  afterAll(async () => {
    await c?.close()
  })

  it('a gateway paused for longer than the workers\' loss window (SIGSTOP 1.2 s, as CPU starvation does) loses no live worker: the streams go on', async () => {
    const streams = await streamsOnBoth(c, 4)
    const pid = c.gateway.proc.pid!
    process.kill(pid, 'SIGSTOP') // 1.2 s > 3 missed heartbeats of 250 ms
    await new Promise((r) => setTimeout(r, 1200))
    process.kill(pid, 'SIGCONT')
    // Every stream keeps streaming for a while after the pause: none is ended WORKER_LOST.
    const t = Date.now() + 1500
    const log: string[] = []
    const ended = await Promise.all(streams.map((r) => readUntilError(r, () => Date.now() > t, log)))
    expect(ended.filter((e) => e !== undefined), log.join('\n')).toEqual([])
    await until(() => running(c.stateDir) === 0, 'the streams cancelled by the reads to leave')
    expect(states(c.stateDir).reduce((n, s) => n + s.cancelled, 0)).toBeGreaterThanOrEqual(streams.length)
  })

  it('a gateway that goes away frees its streams\' slots on both workers at the next step (counted in generator steps)', async () => {
    const streams = await streamsOnBoth(c, 3)
    const gw = await gatewayId(c.baseUrl)
    await c.gateway.stop('SIGKILL')
    // From the moment NATS has dropped the dead gateway's subscription, each worker's next step
    // publishes its tokens message into the void, NATS answers no-responders to the worker's watch
    // inbox, and the step after frees the slots: 2 steps, 4 with one of slack for a step under way
    // and one for a loaded machine. (With the slow probe off, nothing else would free them before
    // their 30 s deadline: 1500 steps.)
    await noSubscriber(c.nats.url, `cohort.gw.${gw}.probe`)
    const at = new Map(states(c.stateDir).map((s) => [s.pid, s.steps]))
    for (const r of streams) {
      await r.text().catch(() => undefined)
    }
    await until(() => running(c.stateDir) === 0, 'the dead gateway\'s sequences to leave the generators')
    const after = states(c.stateDir)
    console.log(`steps after NATS dropped the gateway: ${after.map((s) => s.steps - at.get(s.pid)!).join(', ')}`)
    for (const s of after) {
      expect(s.steps - at.get(s.pid)!, `steps of worker ${s.pid} after NATS dropped the gateway`).toBeLessThanOrEqual(4)
    }
    expect(c.workers.map((w) => w.output()).join('\n')).toMatch(/the gateway of these generations went away; cancelling them/)
    const c2 = spawnCohort(['gateway', '--nats', c.nats.url, '--port', '0'])
    c.gateway = c2
    const [, port] = await c2.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    c.baseUrl = `http://127.0.0.1:${port}`
    // A new gateway is served at once by the same workers.
    const r = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'again', max_tokens: 5, ignore_eos: true, stream: true })
    const data = await sseData(r)
    expect(data.at(-1)).toBe('[DONE]')
  })

  it('a killed worker ends its streams with a retryable WORKER_LOST error event; the other worker\'s streams go on', async () => {
    await until(() => running(c.stateDir) === 0, 'no sequence running before the test')
    const streams = await streamsOnBoth(c, 6)
    const w1 = states(c.stateDir).find((s) => s.running > 0)!
    const victim = c.workers.find((w) => w.proc.pid === w1.pid)
    expect(victim).toBeDefined()
    const onVictim = w1.running
    await victim!.stop('SIGKILL')
    rmSync(w1.file) // a dead process's count no longer counts
    // Every stream on the killed worker ends (nothing hangs) with the error as its last event; the
    // others keep streaming, so they are read only until the victim's have ended.
    const errors: { error: { code: string; message: string } }[] = []
    const log: string[] = []
    await Promise.all(
      streams.map(async (r) => {
        const e = await readUntilError(r, () => errors.length >= onVictim, log)
        if (e) errors.push(e)
      }),
    )
    expect(errors, `victim ${w1.pid} ran ${onVictim} of ${streams.length}; streams ${log.join('\n')}; states ${JSON.stringify(states(c.stateDir))}; gateway:\n${c.gateway.output().slice(-3000)}`).toHaveLength(onVictim)
    for (const e of errors) {
      expect(e.error.code).toBe('WORKER_LOST')
      expect(e.error.message).toMatch(/retry/)
    }
    // The survivor's streams were cancelled by the reads above: its slots are freed too.
    await until(() => states(c.stateDir).every((s) => s.running === 0), 'the survivor\'s cancelled streams to leave')
  })
})

describe('deadlines and the server SLO of generations over NATS (one slot, TTFT SLO 300 ms, generation SLO 3 s)', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(20, [], { workers: 1, env: { CHARGEN_MAX_SEQS: '1', CHARGEN_TTFT_SLO_MS: '300', CHARGEN_GENERATION_MS: '3000' } })
  }, 120_000)
  afterAll(async () => {
    await c?.close()
  })

  it('no slot by the TTFT SLO: 503 OVERLOADED with Retry-After before any token; the client\'s x-cohort-ttft-timeout-ms overrides it; past the generation SLO a stream ends with finish_reason length and the output so far', async () => {
    // A holds the only slot; with no client deadline it gets the model's generation SLO (3 s).
    const a = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'holder', max_tokens: 8000, ignore_eos: true, stream: true })
    expect(a.status).toBe(200)
    const aData = sseData(a)
    await until(() => running(c.stateDir) === 1 && states(c.stateDir)[0]!.waiting === 0, 'the holder to run')
    // B waits for the slot: refused at its first-token deadline, before any token (an HTTP 503, not a stream).
    const b = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'refused', max_tokens: 5, stream: true })
    expect(b.status).toBe(503)
    expect(b.headers.get('retry-after')).toBe('1')
    const be = (await b.json()) as { error: { code: string; message: string } }
    expect(be.error.code).toBe('OVERLOADED')
    expect(be.error.message).toMatch(/time-to-first-token/)
    // C says it can wait 20 s for its first token: it gets the slot once A's generation SLO ends A.
    const cRes = post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'patient', max_tokens: 5, ignore_eos: true }, undefined, { 'x-cohort-ttft-timeout-ms': '20000' })
    await until(() => states(c.stateDir)[0]!.waiting === 1, 'the patient request to wait')
    const chunks = await aData
    expect(chunks.at(-1)).toBe('[DONE]')
    const last = chunks.at(-2) as { choices: { text: string; finish_reason: string | null }[] }
    expect(last.choices[0]?.finish_reason).toBe('length') // cut by the deadline (docs/generative.md#deadlines-and-the-server-slo)
    const text = (chunks.slice(0, -1) as { choices: { text: string }[] }[]).map((x) => x.choices[0]?.text ?? '').join('')
    expect(text.length).toBeGreaterThan(0)
    expect(text.length).toBeLessThan(8000)
    const cr = await cRes
    expect(cr.status).toBe(200)
    expect(((await cr.json()) as { choices: { finish_reason: string }[] }).choices[0]?.finish_reason).toBe('length')
    const bad = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'x', max_tokens: 1 }, undefined, { 'x-cohort-ttft-timeout-ms': 'soon' })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/x-cohort-ttft-timeout-ms must be a positive number/)
  })

  it('Triton generate_stream: a client deadline (x-cohort-timeout-ms) overrides the generation SLO; past it the last event has finish_reason deadline', async () => {
    await until(() => running(c.stateDir) === 0, 'no sequence running before the test')
    const r = await post(c.baseUrl, '/v2/models/chars/generate_stream', { text_input: 'cut short', parameters: { max_tokens: 8000, ignore_eos: true } }, undefined, { 'x-cohort-timeout-ms': '600' })
    expect(r.status).toBe(200)
    const events = (await sseData(r)) as { text_output: string; finish_reason?: string; usage?: { completion_tokens: number } }[]
    const end = events.at(-1)!
    expect(end.finish_reason).toBe('deadline')
    expect(end.usage!.completion_tokens).toBeGreaterThan(0)
    expect(end.usage!.completion_tokens).toBeLessThan(8000)
    const text = events.map((e) => e.text_output).join('')
    expect(text.length).toBeGreaterThan(0) // the output so far (EOS tokens, kept by ignore_eos, have no text)
    expect(text.length).toBeLessThanOrEqual(end.usage!.completion_tokens)
  })
})
