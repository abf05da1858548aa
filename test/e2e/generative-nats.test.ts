// The generative APIs over real NATS: nats-server, two worker processes and a gateway process; plus
// what happens to streams when a worker is killed, the gateway goes away or the gateway is paused.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect } from '@nats-io/transport-node'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
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
      [
        'worker',
        '--nats',
        nats.url,
        '--id',
        id,
        '--threads',
        '1',
        '--heartbeat-ms',
        '250',
        '--generative',
        `chars=${CHAR_GENERATOR}`,
        '--model',
        'demo',
        '--metrics-port',
        '0',
        ...workerFlags,
      ],
      { CHARGEN_STATE: join(stateDir, `${id}.json`), CHARGEN_GATE: join(stateDir, `${id}.gate`), CHARGEN_STEP_MS: String(stepMs), ...o.env },
    )
    workers.push(w)
  }
  await Promise.all(workers.map((w) => w.waitFor(/serving/, 90_000)))
  const metricsUrls = await Promise.all(workers.map(async (w) => (await w.waitFor(/worker metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/, 30_000))[1]!))
  const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  const c: Cluster = {
    nats,
    workers,
    gateway,
    baseUrl: `http://127.0.0.1:${port}`,
    stateDir,
    metricsUrls,
    async close() {
      // This cluster's processes now: a test may have replaced its gateway (c.gateway = ...).
      await Promise.all([...c.workers, c.gateway].map((p) => p.stop('SIGKILL')))
      await nats.stop()
    },
  }
  return c
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
        (e: unknown) => e instanceof Error && (/no responders/i.test(e.message) || (e as { isNoResponders?: () => boolean }).isNoResponders?.() === true),
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
    await ifStarted(c)?.close()
  })

  it("a gateway paused for longer than the workers' loss window (SIGSTOP 1.2 s, as CPU starvation does) loses no live worker: the streams go on", async () => {
    const streams = await streamsOnBoth(c, 4)
    const pid = c.gateway.proc.pid!
    process.kill(pid, 'SIGSTOP') // 1.2 s > 3 missed heartbeats of 250 ms
    await new Promise((r) => setTimeout(r, 1200))
    process.kill(pid, 'SIGCONT')
    // Every stream keeps streaming after the pause, none ended WORKER_LOST, while each generator
    // runs 50 more steps (counted, not timed: 1 s of 20 ms steps on an idle machine, longer on a
    // loaded one, with the gateway's liveness checks running all along).
    const at = new Map(states(c.stateDir).map((s) => [s.pid, s.steps]))
    const moved = () => states(c.stateDir).every((s) => s.steps >= at.get(s.pid)! + 50)
    const log: string[] = []
    const ended = await Promise.all(streams.map((r) => readUntilError(r, moved, log)))
    expect(
      ended.filter((e) => e !== undefined),
      log.join('\n'),
    ).toEqual([])
    expect(moved(), `the generators stepped on: ${log.join('\n')}`).toBe(true)
    await until(() => running(c.stateDir) === 0, 'the streams cancelled by the reads to leave')
    expect(states(c.stateDir).reduce((n, s) => n + s.cancelled, 0)).toBeGreaterThanOrEqual(streams.length)
  })

  it("a gateway that goes away frees its streams' slots on both workers at the next step after NATS drops it (generator steps held by a gate, counted from the kill)", async () => {
    const streams = await streamsOnBoth(c, 3)
    const gw = await gatewayId(c.baseUrl)
    // Hold every generator's steps (CHARGEN_GATE): from here on a worker steps only when the test says.
    const gateFile = (s: { file: string }) => s.file.replace(/\.json$/, '.gate')
    const gate = (s: { file: string }, steps: number) => writeFileSync(gateFile(s), String(steps))
    /** Generations the workers cancelled because their gateway went away (their warnings: one per pack). */
    const cancelledForGone = () =>
      c.workers
        .map((w) => w.output())
        .join('\n')
        .split('\n')
        .filter((l) => l.includes('the gateway of these generations went away; cancelling them'))
        .reduce((n, l) => n + Number(/"generations":(\d+)/.exec(l)?.[1] ?? NaN), 0)
    try {
      for (const s of states(c.stateDir)) gate(s, 0)
      await until(() => states(c.stateDir).every((s) => s.held), 'every generator to hold its steps')
      const before = cancelledForGone()
      await c.gateway.stop('SIGKILL')
      // The baseline: each generator's steps at the kill (none runs while held).
      const at = new Map(states(c.stateDir).map((s) => [s.pid, s.steps]))
      await noSubscriber(c.nats.url, `cohort.gw.${gw}.probe`)
      // One step: its tokens messages go into the void, NATS answers no-responders to each worker's
      // watch inbox and the worker cancels the pack's generations. With the slow probe off, nothing
      // else would notice before their 30 s deadline.
      for (const s of states(c.stateDir)) gate(s, at.get(s.pid)! + 1)
      await until(() => states(c.stateDir).every((s) => s.held && s.steps === at.get(s.pid)! + 1), 'one step of every generator')
      await until(() => cancelledForGone() - before === streams.length, 'every worker to notice the gateway gone after that one step', 15_000)
      expect(running(c.stateDir), 'the cancels land at the next step').toBe(streams.length)
      // The next step frees every slot.
      for (const s of states(c.stateDir)) gate(s, at.get(s.pid)! + 2)
      await until(() => running(c.stateDir) === 0, "the dead gateway's sequences to leave the generators", 15_000)
      for (const s of states(c.stateDir)) expect(s.steps - at.get(s.pid)!, `steps of worker ${s.pid} after the kill`).toBe(2)
    } finally {
      for (const s of states(c.stateDir)) rmSync(gateFile(s), { force: true })
    }
    for (const r of streams) {
      await r.text().catch(() => undefined)
    }
    const c2 = spawnCohort(['gateway', '--nats', c.nats.url, '--port', '0'])
    c.gateway = c2
    const [, port] = await c2.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    c.baseUrl = `http://127.0.0.1:${port}`
    // A new gateway is served at once by the same workers.
    const r = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'again', max_tokens: 5, ignore_eos: true, stream: true })
    const data = await sseData(r)
    expect(data.at(-1)).toBe('[DONE]')
  })

  it("a killed worker ends its streams with a retryable WORKER_LOST error event; the other worker's streams go on", async () => {
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
    expect(
      errors,
      `victim ${w1.pid} ran ${onVictim} of ${streams.length}; streams ${log.join('\n')}; states ${JSON.stringify(states(c.stateDir))}; gateway:\n${c.gateway.output().slice(-3000)}`,
    ).toHaveLength(onVictim)
    for (const e of errors) {
      expect(e.error.code).toBe('WORKER_LOST')
      expect(e.error.message).toMatch(/retry/)
    }
    // The survivor's streams were cancelled by the reads above: its slots are freed too.
    await until(() => states(c.stateDir).every((s) => s.running === 0), "the survivor's cancelled streams to leave")
  })
})

describe('deadlines and the server SLO of generations over NATS (one slot, TTFT SLO 300 ms, generation SLO 5 s)', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(20, [], { workers: 1, env: { CHARGEN_MAX_SEQS: '1', CHARGEN_TTFT_SLO_MS: '300', CHARGEN_GENERATION_MS: '5000' } })
  }, 120_000)
  afterAll(async () => {
    await ifStarted(c)?.close()
  })
  // The generator's step gate (CHARGEN_GATE): deadlines pass in real time, but which step sees what is the test's choice.
  const gate = () => join(c.stateDir, 'w1.gate')
  const st = () => states(c.stateDir)[0]!
  /** Holds the generator's steps (it stops before its next one). */
  const freeze = async () => {
    writeFileSync(gate(), '0')
    await until(() => st().held, 'the generator to hold its steps')
  }
  /** Lets a held generator run exactly one step. */
  const stepOnce = async () => {
    const n = st().steps + 1
    writeFileSync(gate(), String(n))
    await until(() => st().held && st().steps === n, `the generator's step ${n}`)
  }

  it("no slot by the TTFT SLO: 503 OVERLOADED with Retry-After before any token; the client's x-cohort-ttft-timeout-ms overrides it; past the generation SLO a stream ends with finish_reason length and the output so far", async () => {
    // The generator's steps are held by its gate at each point the test looks at, so what runs and
    // what waits does not depend on how fast the machine is; only B's 300 ms first-token budget is
    // waited out in real time.
    try {
      // A holds the only slot; with no client deadline it gets the model's generation SLO (5 s). (Its
      // first-token budget is its own: the model's 300 ms is B's test.)
      const a = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'holder', max_tokens: 8000, ignore_eos: true, stream: true }, undefined, {
        'x-cohort-ttft-timeout-ms': '20000',
      })
      expect(a.status).toBe(200)
      const aData = sseData(a)
      await until(() => st().running === 1 && st().waiting === 0, 'the holder to run')
      await freeze()
      // B waits for the slot: refused at its first-token deadline, before any token (an HTTP 503, not a stream).
      const bRes = post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'refused', max_tokens: 5, stream: true })
      await until(() => st().waiting === 1, 'B to wait for the slot')
      await new Promise((r) => setTimeout(r, 400)) // past B's first-token deadline (300 ms after the gateway took it)
      await stepOnce() // B is refused in it, A keeps the slot
      expect(st(), 'B refused, A still running').toMatchObject({ running: 1, waiting: 0 })
      const b = await bRes
      expect(b.status).toBe(503)
      expect(b.headers.get('retry-after')).toBe('1')
      const be = (await b.json()) as { error: { code: string; message: string } }
      expect(be.error.code).toBe('OVERLOADED')
      expect(be.error.message).toMatch(/time-to-first-token/)
      // C says it can wait 20 s for its first token: it gets the slot once A's generation SLO ends A.
      const cRes = post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'patient', max_tokens: 5, ignore_eos: true }, undefined, { 'x-cohort-ttft-timeout-ms': '20000' })
      await until(() => st().waiting === 1, 'the patient request to wait')
      rmSync(gate()) // free running from here: A runs to its 5 s generation SLO, then C
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
    } finally {
      rmSync(gate(), { force: true })
    }
    const bad = await post(c.baseUrl, '/v1/completions', { model: 'chars', prompt: 'x', max_tokens: 1 }, undefined, { 'x-cohort-ttft-timeout-ms': 'soon' })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/x-cohort-ttft-timeout-ms must be a positive number/)
  })

  it('Triton generate_stream: a client deadline (x-cohort-timeout-ms) overrides the generation SLO; past it the last event has finish_reason deadline', async () => {
    await until(() => running(c.stateDir) === 0, 'no sequence running before the test')
    try {
      writeFileSync(gate(), '0') // the idle generator holds from the request's arrival
      const t0 = Date.now()
      const res = post(c.baseUrl, '/v2/models/chars/generate_stream', { text_input: 'cut short', parameters: { max_tokens: 8000, ignore_eos: true } }, undefined, {
        'x-cohort-timeout-ms': '2000',
        'x-cohort-ttft-timeout-ms': '2000',
      })
      await until(() => st().held && st().waiting === 1, 'the request to wait at the gate')
      await stepOnce() // its first token
      const r = await res
      expect(r.status).toBe(200)
      // Held past its deadline (2 s after it was sent, so after the gateway's too), then free: the next step ends it.
      await new Promise((ok) => setTimeout(ok, Math.max(0, t0 + 2200 - Date.now())))
      rmSync(gate())
      const events = (await sseData(r)) as { text_output: string; finish_reason?: string; usage?: { completion_tokens: number } }[]
      const end = events.at(-1)!
      expect(end.finish_reason).toBe('deadline')
      expect(end.usage!.completion_tokens).toBe(1)
      const text = events.map((e) => e.text_output).join('')
      expect(text.length).toBeGreaterThan(0) // the output so far (EOS tokens, kept by ignore_eos, have no text)
      expect(text.length).toBeLessThanOrEqual(end.usage!.completion_tokens)
    } finally {
      rmSync(gate(), { force: true })
    }
  })
})
