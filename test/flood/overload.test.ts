// Overload that holds, across processes (docs/reliability.md#overload-cheap-refusals-admission-with-a-margin-no-unseen-wait):
// a real nats-server, a `cohort worker` serving the sleep-based `sleepy` predictor (40 ms per batch of
// up to 4: about 100 items/s whatever the machine's load, model-bound, not CPU-bound) and a
// `cohort gateway` with two API keys (two tenants) and gRPC. One tenant floods with 60 closed-loop
// keep-alive clients (each resends at once after a 200, 100 ms after a refusal: about 6x the
// capacity, so overload even on a loaded machine), 300 ms deadlines; a quiet tenant sends one request every 100 ms with
// 1 s deadlines. Counted, not timed as rates: every request is answered 200, 503 or 504 by its
// deadline plus the reply grace (plus a fixed allowance for this loaded test process's own event
// loop), the quiet tenant gets >= 0.9 of its requests answered 200 in time, the gateway writes no
// `warn` line per refusal (one aggregated line per 10 s at most) and a refused keep-alive connection
// serves the next request. Then the same flood over gRPC: refusals are RESOURCE_EXHAUSTED with
// retry info, every call answered by its deadline plus grace.
// In the flood suite (`npx vitest run --project flood`), not `npm test`.
import { Agent, request } from 'node:http'
import type { Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { PROTO_DIR } from '@cohort/gateway/grpc'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

/** The gateway's reply grace (REPLY_GRACE_MS). */
const GRACE_MS = 50
/** Allowance for this test process's own event loop (the flood clients share it with the measurement). */
const CLIENT_SLACK_MS = 250
const FLOOD_CLIENTS = 60
/** A flood client's pause after a refusal, ms (it ignores Retry-After): 60 clients offer up to 600 refusals/s on top of what is admitted, 6x the capacity. */
const REFUSED_PAUSE_MS = 100
const FLOOD_DEADLINE_MS = 300
const QUIET_DEADLINE_MS = 1000
const PHASE_MS = 8000

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let port = 0
let grpcPort = 0

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: false })
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'flood', '--threads', '1', '--max-batch-size', '4', '--predictor', SLEEPY_PREDICTOR], { SLEEPY_MS: '40' })
  await worker.waitFor(/worker flood serving sleepy/, 60_000)
  gateway = spawnCohort([
    'gateway',
    '--nats',
    nats.url,
    '--port',
    '0',
    '--grpc-port',
    '0',
    '--api-key',
    'flood-key',
    '--api-key',
    'quiet-key',
    '--log-format',
    'json',
    '--max-connections',
    '512',
  ])
  port = Number((await gateway.waitFor(/gateway on http:\/\/[^:]+:(\d+)/, 60_000))[1])
  grpcPort = Number((await gateway.waitFor(/grpc on [^:]+:(\d+)/, 10_000))[1])
}, 120_000)

afterAll(async () => {
  await ifStarted(gateway)?.stop('SIGTERM', 10_000)
  await ifStarted(worker)?.stop('SIGTERM', 10_000)
  await ifStarted(nats)?.stop()
})

interface Answer {
  status: number
  ms: number
  deadlineMs: number
  socket: Socket | undefined
  code?: string
  /** When it was sent, ms since the phase began. */
  at: number
  /** The answer's `Connection` header said `close`. */
  closes: boolean
}
let phaseStart = 0
/** Sockets the server closed within {@link SOON_CLOSED_MS} of a refusal on them (the idle keep-alive timeout, 5 s, is not that). */
const closedAfterRefusal: string[] = []
const SOON_CLOSED_MS = 1000
/** The latest answer of each socket: its status and when it ended. */
const lastAnswer = new WeakMap<Socket, { status: number; at: number }>()

/** Watch `socket` once: record it when it closes soon after a refusal on it. */
function watchSocket(socket: Socket | null): void {
  if (!socket || lastAnswer.has(socket)) {
    return
  }
  socket.once('close', () => {
    const last = lastAnswer.get(socket)
    if (last && last.status === 503 && performance.now() - last.at < SOON_CLOSED_MS) {
      closedAfterRefusal.push(`closed ${Math.round(performance.now() - last.at)} ms after a refusal`)
    }
  })
}

/** One prediction of `key` with `deadlineMs`: status, client-measured time and the socket it used. */
function predict(agent: Agent, key: string, x: number, deadlineMs: number): Promise<Answer> {
  const t0 = performance.now()
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/models/sleepy/predictions',
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-cohort-timeout-ms': String(deadlineMs) },
      },
      (res) => {
        let text = ''
        res.on('data', (d: Buffer) => (text += d.toString()))
        res.on('end', () => {
          let code: string | undefined
          try {
            code = (JSON.parse(text) as { code?: string }).code
          } catch {
            code = undefined
          }
          watchSocket(req.socket)
          if (req.socket) lastAnswer.set(req.socket, { status: res.statusCode ?? 0, at: performance.now() })
          const closes = res.headers.connection === 'close'
          resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0, deadlineMs, socket: req.socket ?? undefined, at: t0 - phaseStart, closes, ...(code ? { code } : {}) })
        })
      },
    )
    req.on('error', () => resolve({ status: 0, ms: performance.now() - t0, deadlineMs, socket: undefined, at: t0 - phaseStart, closes: true }))
    req.end(JSON.stringify({ input: { x } }))
  })
}

const warnLines = () =>
  gateway
    .output()
    .split('\n')
    .filter((l) => l.includes('"level":"warn"'))
const late = (as: Answer[]) => as.filter((a) => a.ms > a.deadlineMs + GRACE_MS + CLIENT_SLACK_MS)

describe('a cross-process flood', () => {
  it('answers every request 200/503/504 by its deadline + grace, serves the quiet tenant (>= 0.9 on time), writes no warn line per refusal and keeps refused keep-alive connections', async () => {
    const warm = new Agent({ keepAlive: true, maxSockets: 1 })
    // Warm the worker's cost model (admission and its estimates judge from the 5th batch on).
    for (let i = 0; i < 8; i++) expect((await predict(warm, 'quiet-key', i, 5000)).status).toBe(200)
    warm.destroy()
    const warnsBefore = warnLines().length

    const floodAgent = new Agent({ keepAlive: true, maxSockets: FLOOD_CLIENTS })
    const quietAgent = new Agent({ keepAlive: true, maxSockets: 4 })
    const flood: Answer[] = []
    const quiet: Answer[] = []
    phaseStart = performance.now()
    const end = phaseStart + PHASE_MS
    const clients = Array.from({ length: FLOOD_CLIENTS }, async (_, k) => {
      while (performance.now() < end) {
        const a = await predict(floodAgent, 'flood-key', 1000 + k, FLOOD_DEADLINE_MS)
        flood.push(a)
        if (a.status !== 200) await new Promise((r) => setTimeout(r, REFUSED_PAUSE_MS))
      }
    })
    const quietRun = (async () => {
      const sent: Promise<void>[] = []
      for (let i = 0; performance.now() < end; i++) {
        sent.push(predict(quietAgent, 'quiet-key', i, QUIET_DEADLINE_MS).then((a) => void quiet.push(a)))
        await new Promise((r) => setTimeout(r, 100))
      }
      await Promise.all(sent)
    })()
    await Promise.all([...clients, quietRun])

    const all = [...flood, ...quiet]
    const by = (as: Answer[], s: number) => as.filter((a) => a.status === s).length
    const refused = flood.filter((a) => a.status === 503)
    const quietOnTime = quiet.filter((a) => a.status === 200 && a.ms <= a.deadlineMs + GRACE_MS + CLIENT_SLACK_MS).length
    const refusalMs = refused.map((a) => a.ms).sort((x, y) => x - y)
    console.log(
      `flood: ${flood.length} flood requests (${by(flood, 200)} 200, ${refused.length} 503, ${by(flood, 504)} 504, ${by(flood, 0)} no answer), ` +
        `refusal p50 ${refusalMs[Math.floor(refusalMs.length / 2)]?.toFixed(1)} ms p99 ${refusalMs[Math.floor(refusalMs.length * 0.99)]?.toFixed(1)} ms; ` +
        `quiet ${quietOnTime}/${quiet.length} on time (${by(quiet, 503)} 503, ${by(quiet, 504)} 504); late answers ${late(all).length}; ` +
        `warn lines ${warnLines().length - warnsBefore}`,
    )
    // Overload: most of the flood is refused (capacity is about 100/s; the flood offers many times that).
    expect(refused.length).toBeGreaterThan(by(flood, 200))
    // Every request answered, with one of the three statuses, by its deadline + grace.
    expect(all.filter((a) => ![200, 503, 504].includes(a.status))).toEqual([])
    expect(late(all).map((a) => `${a.status} ${a.code ?? ''} in ${Math.round(a.ms)} ms (deadline ${a.deadlineMs}, sent at +${Math.round(a.at)} ms)`)).toEqual([])
    expect(refused.every((a) => a.code === 'OVERLOADED')).toBe(true)
    // The quiet tenant is served on its own state.
    expect(quiet.length).toBeGreaterThanOrEqual(40)
    expect(quietOnTime / quiet.length).toBeGreaterThanOrEqual(0.9)
    // No warn line per refusal: none names OVERLOADED, at most one aggregated line per 10 s of the
    // phase; the other warn lines are the admitted requests that failed (504), one each.
    const warns = warnLines().slice(warnsBefore)
    const summaries = warns.filter((l) => l.includes('requests refused (overload)'))
    expect(warns.filter((l) => l.includes('"code":"OVERLOADED"'))).toEqual([])
    expect(summaries.length).toBeGreaterThanOrEqual(1)
    expect(summaries.length).toBeLessThanOrEqual(Math.ceil(PHASE_MS / 10_000) + 1)
    expect(warns.length - summaries.length).toBeLessThanOrEqual(by(all, 504))
    // Refused keep-alive connections stay open: no refusal says `Connection: close`, none is followed
    // by the server closing its socket, and refusals reuse far fewer sockets than they are. (The
    // agent's LIFO pool leaves some sockets idle past the server's 5 s keep-alive timeout; those
    // closes, and the new sockets after them, are the client's, not a refusal's.)
    expect(refused.filter((a) => a.closes)).toEqual([])
    expect(closedAfterRefusal).toEqual([])
    const sockets = new Set(refused.map((a) => a.socket))
    expect(refused.length).toBeGreaterThan(2 * sockets.size)
    floodAgent.destroy()
    quietAgent.destroy()
  }, 60_000)

  it('over gRPC: the flood is refused RESOURCE_EXHAUSTED with retry-after and grpc-retry-pushback-ms, every call answered by its deadline + grace', async () => {
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
    const client = new GRPCInferenceService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure())
    const md = new grpc.Metadata()
    md.set('authorization', 'Bearer flood-key')
    const req = {
      model_name: 'sleepy',
      inputs: [{ name: 'x', datatype: 'FP64', shape: [1], contents: { fp64_contents: [1] } }],
    }
    interface Call {
      code: grpc.status
      ms: number
      retryAfter?: string
      pushback?: string
    }
    const call = (): Promise<Call> => {
      const t0 = performance.now()
      return new Promise((resolve) =>
        client['ModelInfer']!(req, md, { deadline: Date.now() + FLOOD_DEADLINE_MS }, (e: grpc.ServiceError | null) =>
          resolve({
            code: e?.code ?? grpc.status.OK,
            ms: performance.now() - t0,
            ...(e ? { retryAfter: String(e.metadata.get('retry-after')[0] ?? ''), pushback: String(e.metadata.get('grpc-retry-pushback-ms')[0] ?? '') } : {}),
          }),
        ),
      )
    }
    const warnsBefore = warnLines().length
    const calls: Call[] = []
    const end = performance.now() + 5000
    await Promise.all(
      Array.from({ length: FLOOD_CLIENTS }, async () => {
        while (performance.now() < end) {
          const c = await call()
          calls.push(c)
          if (c.code !== grpc.status.OK) await new Promise((r) => setTimeout(r, REFUSED_PAUSE_MS))
        }
      }),
    )
    client.close()
    const by = (s: grpc.status) => calls.filter((c) => c.code === s).length
    const exhausted = calls.filter((c) => c.code === grpc.status.RESOURCE_EXHAUSTED)
    console.log(
      `grpc flood: ${calls.length} calls, ${by(grpc.status.OK)} OK, ${exhausted.length} RESOURCE_EXHAUSTED, ${by(grpc.status.DEADLINE_EXCEEDED)} DEADLINE_EXCEEDED, other ${calls.length - by(grpc.status.OK) - exhausted.length - by(grpc.status.DEADLINE_EXCEEDED)}`,
    )
    expect(exhausted.length).toBeGreaterThan(by(grpc.status.OK))
    expect(calls.filter((c) => ![grpc.status.OK, grpc.status.RESOURCE_EXHAUSTED, grpc.status.DEADLINE_EXCEEDED].includes(c.code))).toEqual([])
    expect(calls.filter((c) => c.ms > FLOOD_DEADLINE_MS + GRACE_MS + CLIENT_SLACK_MS).map((c) => `${c.code} in ${Math.round(c.ms)} ms`)).toEqual([])
    expect(exhausted.every((c) => Number(c.retryAfter) >= 1 && Number(c.pushback) === 1000 * Number(c.retryAfter))).toBe(true)
    expect(
      warnLines()
        .slice(warnsBefore)
        .filter((l) => l.includes('"code":"OVERLOADED"')),
    ).toEqual([])
  }, 60_000)
})
