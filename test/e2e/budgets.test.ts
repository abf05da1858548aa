// Per-request budgets, counted not timed (docs/architecture.md#per-request-budgets): each path runs
// requests one at a time after a warm-up, in this process (gateway and worker, real ORT, real HTTP,
// a real nats-server for the distributed path), and what one request costs above a bare node:http
// server answering the same client is checked against its budget. A change that adds a timer, a
// thread hand-off, a NATS message or an encode to every request fails here on any machine.
import { createServer, request as httpRequest, Agent, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { PROTO_DIR, startGrpcServer } from '@cohort/gateway/grpc'
import { createApp } from '@cohort/gateway'
import { Registry } from '@cohort/metrics'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { InProcessTransport, createNatsTransport, type Transport } from '@cohort/transport'
import { CohortWorker, OnnxRunner, PredictorRunner, buildPipelineRunners, loadPredictors } from '@cohort/worker'
import { Type, defineConfig, definePipeline, stage } from '@cohort/pipeline'
import { serve } from '@hono/node-server'
import {
  SLEEPY_PREDICTOR,
  countPerRequest,
  keptLogger,
  countsAbove,
  startNatsServer,
  writeModelFixtures,
  type NatsServerHandle,
  type RequestCounts,
  ifStarted,
} from '@cohort/test-support'

const FEATURES = 64
const N = 40
const agent = new Agent({ keepAlive: true, maxSockets: 1 })

/** One keep-alive POST (or GET without a body), `status` expected (200 by default); the body as text. */
function post(url: string, body: string | undefined, headers: Record<string, string> = {}, status = 200): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: body === undefined ? 'GET' : 'POST', agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (d: Buffer) => chunks.push(d))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        if (res.statusCode !== status) {
          reject(new Error(`${url}: ${res.statusCode} ${text}`))
        } else {
          resolve(text)
        }
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

const inferBody = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, FEATURES], data: Array.from({ length: FEATURES }, (_, i) => i / 8) }] })
const predictorBody = JSON.stringify({
  inputs: [
    { name: 'x', datatype: 'FP64', shape: [1], data: [2] },
    { name: 'sleepMs', datatype: 'FP64', shape: [1], data: [0] },
  ],
})

interface Stack {
  base: string
  close(): Promise<void>
}

/** Columns of the `wide` Identity model: one row is over the gateway's pack size (256 KiB). */
const WIDE = 70_000

/** A fused pipeline of two TypeScript stages (every stage in this worker, none remote). */
const fusedPipeline = () =>
  buildPipelineRunners({
    loaded: {
      file: 'budgets.test.ts',
      dir: '.',
      config: defineConfig({
        models: [
          definePipeline({
            name: 'two-stage', // after 'sleepy': POST /predictions naming no model still goes to the predictor
            input: Type.Object({ x: Type.Number() }),
            stages: [
              stage<{ x: number }, { x: number }>({ name: 'double', run: (items) => items.map((i) => ({ x: i.x * 2 })) }),
              stage<{ x: number }, { y: number }>({ name: 'inc', run: (items) => items.map((i) => ({ y: i.x + 1 })) }),
            ],
          }),
        ],
      }),
    },
    fused: true,
  })

async function startStack(transport: Transport, identity: string, gateway: Transport = transport, extra: () => Promise<void> = () => Promise.resolve()): Promise<Stack> {
  const registry = new Registry()
  const [sleepy] = await loadPredictors(SLEEPY_PREDICTOR)
  const pipeline = fusedPipeline()
  const worker = new CohortWorker({
    transport,
    registry,
    runners: [
      // The inline lane at 5 ms, not the 0.25 ms default: a loaded machine stretches this microsecond
      // run's wall time past 0.25 ms at start, and the budgets count the lane's work, not its choice
      // (apps/worker/src/ort/inline-lane.test.ts checks the choice).
      new OnnxRunner({ name: 'tensor', path: identity, intraOpNumThreads: 1, inlineRunMs: 5 }),
      // 'wide' keeps every batch on the pool (inlineRunMs 0): its hand-off stays counted, one postMessage.
      new OnnxRunner({ name: 'wide', path: identity.replace('identity64', 'wide'), intraOpNumThreads: 1, inlineRunMs: 0 }),
      new PredictorRunner(sleepy!),
      ...pipeline.runners,
    ],
    outputSchemas: { sleepy: sleepy!.output, ...pipeline.outputSchemas },
  })
  await worker.start()
  // The server-side SLO is derived from the model's run time: a high one keeps admission out of a loaded machine's way.
  const app = createApp({ transport: gateway, registry: gateway === transport ? registry : new Registry(), requestTimeoutMs: 30_000 })
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
  })
  // Counted once the gateway (subscribed by createApp) heard a heartbeat: from then on it speaks
  // protocol v2 (packs), as it does in steady state.
  const beat = gateway.subscribe('cohort.heartbeat')
  await beat[Symbol.asyncIterator]().next()
  beat.unsubscribe()
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await worker.close()
      await new Promise<void>((r) => (server as Server).close(() => r()))
      await transport.close()
      if (gateway !== transport) {
        await gateway.close()
      }
      await extra()
    },
  }
}

let dir: string
let identity: string
let floor: RequestCounts
let floorServer: Server

beforeAll(async () => {
  dir = writeModelFixtures().dir
  identity = join(dir, 'identity64.onnx')
  writeFileSync(
    identity,
    model(
      graph({
        name: 'id',
        inputs: [valueInfo('in', 'FP32', ['batch', FEATURES])],
        outputs: [valueInfo('out', 'FP32', ['batch', FEATURES])],
        nodes: [node('Identity', ['in'], ['out'])],
      }),
    ),
  )
  writeFileSync(
    join(dir, 'wide.onnx'),
    model(
      graph({ name: 'wide', inputs: [valueInfo('in', 'FP32', ['batch', WIDE])], outputs: [valueInfo('out', 'FP32', ['batch', WIDE])], nodes: [node('Identity', ['in'], ['out'])] }),
    ),
  )
  // The floor: the same client against a bare node:http server that reads the body and answers JSON.
  floorServer = createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'))
  })
  await new Promise<void>((r) => floorServer.listen(0, '127.0.0.1', () => r()))
  const url = `http://127.0.0.1:${(floorServer.address() as AddressInfo).port}/`
  floor = await countPerRequest(() => post(url, inferBody), N)
})

afterAll(async () => {
  await new Promise<void>((r) => floorServer.close(() => r()))
  agent.destroy()
})

/**
 * Print and check one path's counts above the floor against its budget (every key of `budget` is
 * checked). Per-request work counts whole; the budgets' fractions leave room for periodic work
 * (heartbeats, the loss check) that lands in a slow run: half a timer or encode per request would
 * take a heartbeat per two requests, 2 s a request. One more per request is over.
 */
function expectWithin(path: string, counts: RequestCounts, budget: Partial<RequestCounts>): void {
  const above = countsAbove(counts, floor)
  console.log(`budget ${path}: ${JSON.stringify(above)}`)
  for (const [k, max] of Object.entries(budget) as [keyof RequestCounts, number][]) {
    expect({ path, key: k, perRequest: above[k] <= max ? 'within' : above[k] }).toEqual({ path, key: k, perRequest: 'within' })
  }
}

describe('per-request budgets: embedded (in-process transport, what cohort serve runs)', () => {
  let s: Stack
  beforeAll(async () => {
    s = await startStack(new InProcessTransport(), identity)
  })
  afterAll(() => s.close())

  it('OIP infer on an ONNX model', async () => {
    const c = await countPerRequest(() => post(`${s.base}/v2/models/tensor/infer`, inferBody), N)
    // The run is on the inline lane (docs/architecture.md#the-inline-lane): no postMessage to an ORT
    // thread (was 1 per request), and onnxruntime-node's own setImmediate around session.run() now
    // runs on this thread, so immediates are one more (2 -> 3; the budget was 2.5, now 3.5).
    expectWithin('embedded ONNX infer', c, {
      timers: 0.5,
      immediates: 3.5,
      promises: 86, // 83.9 measured (2026-12-04), 84.4 with a core kept busy (90.0 / 90.4 before): work the clock triggers on a request's path; 2 of headroom
      socketWrites: 0.2,
      postMessages: 0.5,
      jsonParses: 1,
      jsonStringifies: 2,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 1.2,
    })
  })

  it('OIP infer of 4 rows on an ONNX model: its rows come back as one view of the batch output, not a copy', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [4, FEATURES], data: Array.from({ length: 4 * FEATURES }, (_, i) => i / 8) }] })
    const c = await countPerRequest(() => post(`${s.base}/v2/models/tensor/infer`, body), N)
    expectWithin('embedded ONNX infer, 4 rows', c, { timers: 0.5, immediates: 3.5, postMessages: 0.5, msgpackEncodes: 0.5, msgpackDecodes: 0.5, tensorCopies: 1.2 })
  })

  it('OIP infer on a TypeScript predictor', async () => {
    const c = await countPerRequest(() => post(`${s.base}/v2/models/sleepy/infer`, predictorBody), N)
    // The one timer is the predictor's own (its sleepMs: 0 sleep).
    expectWithin('embedded predictor infer', c, {
      timers: 1.5,
      immediates: 2.5,
      promises: 89, // 84.9 measured (2026-12-04; 90 before)
      socketWrites: 0.2,
      postMessages: 0.2,
      jsonParses: 1,
      jsonStringifies: 6,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 0.2,
    })
  })

  it('POST /predictions naming no model (the default is the first served)', async () => {
    const c = await countPerRequest(() => post(`${s.base}/predictions`, JSON.stringify({ input: { x: 2, sleepMs: 0 } })), N)
    expectWithin('embedded /predictions', c, {
      timers: 1.6,
      immediates: 2.5,
      promises: 93, // 88.9 measured (2026-12-04; 94 before)
      socketWrites: 0.2,
      postMessages: 0.2,
      jsonParses: 1,
      jsonStringifies: 2,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 0.2,
    })
  })

  it('a fused pipeline of two TypeScript stages, above the floor and above a predictor alone', async () => {
    const c = await countPerRequest(() => post(`${s.base}/models/two-stage/predictions`, JSON.stringify({ input: { x: 2 } })), N)
    const alone = await countPerRequest(() => post(`${s.base}/models/sleepy/predictions`, JSON.stringify({ input: { x: 2, sleepMs: 0 } })), N)
    console.log(`budget fused pipeline above the predictor alone: ${JSON.stringify(countsAbove(c, alone))}`)
    expectWithin('embedded fused pipeline', c, {
      timers: 0.5,
      immediates: 2.5,
      promises: 106, // 101.9 measured (2026-12-04; 108 before)
      socketWrites: 0.2,
      postMessages: 0.2,
      jsonParses: 1,
      jsonStringifies: 2,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 0.2,
    })
  })

  it('bulk predictions of 4 inputs', async () => {
    const body = JSON.stringify({ inputs: [1, 2, 3, 4].map((x) => ({ x, sleepMs: 0 })) })
    const c = await countPerRequest(() => post(`${s.base}/models/sleepy/predictions/bulk`, body), N)
    expectWithin('embedded bulk x4', c, {
      timers: 1.6,
      immediates: 2.5,
      promises: 133, // 128.9 measured (2026-12-04; 136 before)
      socketWrites: 0.2,
      postMessages: 0.2,
      jsonParses: 1,
      jsonStringifies: 1,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 0.2,
    })
  })
})

/** The OIP gRPC service's client constructor (and its definition, for the floor server). */
function oipService(): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  return (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference.GRPCInferenceService
}

function modelInfer(client: InstanceType<grpc.ServiceClientConstructor>, req: Record<string, unknown>): Promise<unknown> {
  return new Promise((resolve, reject) =>
    (client['ModelInfer'] as (r: unknown, md: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void).call(client, req, new grpc.Metadata(), (e, r) =>
      e ? reject(e) : resolve(r),
    ),
  )
}

describe('per-request budgets: gRPC ModelInfer (embedded)', () => {
  const Service = oipService()
  const closers: (() => Promise<void>)[] = []
  afterAll(async () => {
    for (const c of closers.reverse()) {
      await c()
    }
  })

  it('ONNX infer over the OIP gRPC service, above a bare grpc-js server answering the same call', async () => {
    const req = { model_name: 'tensor', inputs: [{ name: 'in', datatype: 'FP32', shape: [1, FEATURES] }], raw_input_contents: [Buffer.from(new Float32Array(FEATURES).buffer)] }
    // The floor: grpc-js serving ModelInfer with an empty answer, the same client.
    const bare = new grpc.Server()
    bare.addService(Service.service, { ModelInfer: (_c: unknown, cb: (e: null, r: object) => void) => cb(null, { model_name: 'tensor', outputs: [], raw_output_contents: [] }) })
    const barePort = await new Promise<number>((resolve, reject) => bare.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))))
    closers.push(() => new Promise<void>((r) => bare.tryShutdown(() => r())))
    const floorClient = new Service(`127.0.0.1:${barePort}`, grpc.credentials.createInsecure())
    closers.push(() => {
      floorClient.close()
      return Promise.resolve()
    })
    const grpcFloor = await countPerRequest(() => modelInfer(floorClient, req), N)

    const transport = new InProcessTransport()
    const s = await startStack(transport, identity)
    closers.push(() => s.close())
    const server = await startGrpcServer({ transport, port: 0, requestTimeoutMs: 30_000 })
    closers.push(() => server.close())
    const client = new Service(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
    closers.push(() => {
      client.close()
      return Promise.resolve()
    })
    // The gRPC server's own gateway speaks v2 once it heard a heartbeat.
    const beat = transport.subscribe('cohort.heartbeat')
    await beat[Symbol.asyncIterator]().next()
    beat.unsubscribe()
    const c = await countPerRequest(() => modelInfer(client, req), N)
    const above = countsAbove(c, grpcFloor)
    console.log(`budget gRPC ONNX infer (above bare grpc-js): ${JSON.stringify(above)}`)
    // Inline lane: no postMessage, ORT's setImmediate on this thread (as for embedded ONNX infer).
    const budget: Partial<RequestCounts> = {
      timers: 0.5,
      immediates: 3.5,
      promises: 33, // 32 measured (2026-12-04; 38 before)
      postMessages: 0.5,
      jsonParses: 0.5,
      jsonStringifies: 0.5,
      msgpackEncodes: 0.5,
      msgpackDecodes: 0.5,
      tensorCopies: 1.2,
    }
    for (const [k, max] of Object.entries(budget) as [keyof RequestCounts, number][]) {
      expect({ key: k, perRequest: above[k] <= max ? 'within' : above[k] }).toEqual({ key: k, perRequest: 'within' })
    }
  })
})

describe('per-request budgets: distributed (gateway and worker on their own NATS connections)', () => {
  let nats: NatsServerHandle
  let s: Stack
  let gwNc: NatsConnection
  let spy: NatsConnection
  const seen = new Map<string, number>()
  /**
   * Messages a request can cause: the product's own subjects (`cohort.*`: infer, overflow, meta,
   * discover, the gateway inbox), less the periodic heartbeats. Liveness probes (`$SRV.PING.*`, when a
   * heartbeat is late on a loaded machine) and their `_INBOX` replies are the liveness machinery's,
   * not the request's.
   */
  const requestMessages = () => [...seen].filter(([k]) => k.startsWith('cohort.') && k !== 'cohort.heartbeat').reduce((a, [, v]) => a + v, 0)
  beforeAll(async () => {
    nats = await startNatsServer()
    const wNc = await connect({ servers: nats.url })
    gwNc = await connect({ servers: nats.url })
    spy = await connect({ servers: nats.url })
    const sub = spy.subscribe('>')
    void (async () => {
      for await (const m of sub) {
        const kind = m.subject.split('.').slice(0, 2).join('.')
        seen.set(kind, (seen.get(kind) ?? 0) + 1)
      }
    })()
    await spy.flush()
    const worker = createNatsTransport(wNc, { ownsConnection: true })
    const gw = createNatsTransport(gwNc, { ownsConnection: true })
    s = await startStack(worker, identity, gw, async () => {
      await spy.close()
      await nats.stop()
    })
  })
  afterAll(() => ifStarted(s)?.close())

  it('OIP infer on an ONNX model: NATS messages per request', async () => {
    await post(`${s.base}/v2/models/tensor/infer`, inferBody)
    seen.clear()
    const c = await countPerRequest(() => post(`${s.base}/v2/models/tensor/infer`, inferBody), N, 0)
    const msgs = Object.fromEntries([...seen].map(([k, v]) => [k, Math.round((v / N) * 100) / 100]))
    console.log(`nats messages per request: ${JSON.stringify(msgs)}`)
    // Inline lane in the worker: no postMessage, ORT's setImmediate on the worker's main thread.
    expectWithin('distributed ONNX infer', c, {
      timers: 0.5,
      immediates: 3.5,
      promises: 174, // 168.0 measured with the background (heartbeats, liveness) taken off (2026-12-04; 170.2 before); 172-174 counted it in: 6 of headroom
      socketWrites: 3.1,
      postMessages: 0.5,
      jsonParses: 1,
      jsonStringifies: 2.5,
      msgpackEncodes: 3.5,
      msgpackDecodes: 3.5,
      tensorCopies: 1.2,
    })
    // The request, the worker's accept notice, the reply: heartbeats are periodic, not per request.
    const perRequest = requestMessages() / N
    expect({ natsMessagesPerRequest: perRequest <= 3.05 ? 'within' : perRequest }).toEqual({ natsMessagesPerRequest: 'within' })
  })

  it('a refusal at the door (503 OVERLOADED) costs no NATS message, no log line, no JSON parse, and a fraction of an answer', async () => {
    // A second gateway on the same bus whose door refuses every request: its event-loop-lag check
    // reads a delay past any budget. The answer is the first gateway's, counted the same way.
    const kept = keptLogger()
    const refusing = createApp({ transport: createNatsTransport(gwNc), registry: new Registry(), logger: kept.logger, adapter: { queueDelayMs: () => 60_000 } })
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const srv = serve({ fetch: refusing.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(srv))
    })
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/models/tensor/infer`
    try {
      await post(url, inferBody, {}, 503)
      seen.clear()
      kept.lines.length = 0
      const cpu0 = process.cpuUsage()
      const refusal = await countPerRequest(() => post(url, inferBody, {}, 503), N, 0)
      const refusalCpu = process.cpuUsage(cpu0)
      const msgs = requestMessages()
      const bySubject = Object.fromEntries(seen)
      const cpu1 = process.cpuUsage()
      const answer = await countPerRequest(() => post(`${s.base}/v2/models/tensor/infer`, inferBody), N, 0)
      const answerCpu = process.cpuUsage(cpu1)
      const above = { refusal: countsAbove(refusal, floor), answer: countsAbove(answer, floor) }
      const us = (c: NodeJS.CpuUsage) => Math.round((c.user + c.system) / N)
      // CPU per request of this whole process (client, both gateways, the worker): printed, not asserted (a rate).
      console.log(`budget refusal vs answer: ${JSON.stringify(above)}; process CPU per request: refusal ${us(refusalCpu)} us, answer ${us(answerCpu)} us`)
      // A fifth of an answer, counted in promises (the closest count to CPU that does not depend on the machine).
      expect({ refusalOverAnswerPromises: above.refusal.promises <= 0.2 * above.answer.promises ? 'within a fifth' : above.refusal.promises / above.answer.promises }).toEqual({
        refusalOverAnswerPromises: 'within a fifth',
      })
      expect({ natsMessages: msgs, logLines: kept.lines.length, jsonParses: refusal.jsonParses - floor.jsonParses }, JSON.stringify(bySubject)).toEqual({
        natsMessages: 0,
        logLines: 0,
        jsonParses: 0,
      })
      // The one timer: @hono/node-server's drain of the unread body (500 ms, unref'd), as for any answer given before the body is read.
      expectWithin('distributed refusal', refusal, {
        timers: 1.2,
        immediates: 0.2,
        promises: 30,
        socketWrites: 0.2,
        postMessages: 0,
        jsonParses: 0,
        jsonStringifies: 1.1, // 1 each (the 503 body); the aggregated refusal line (one per 10 s) can land in the window: 1.02 once under a busy core
        msgpackEncodes: 0,
        msgpackDecodes: 0,
      })
    } finally {
      await new Promise<void>((r) => (server as Server).close(() => r()))
      await refusing.close()
    }
  })

  it('a request over the pack size is encoded once (not once for the pack and again with ack)', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, WIDE], data: new Array(WIDE).fill(0) }] })
    const c = await countPerRequest(() => post(`${s.base}/v2/models/wide/infer`, body), 10, 2)
    // The one timer is the NATS request's (protocol v1: a request alone in its message). The one
    // postMessage is the pool's hand-off ('wide' has no inline lane).
    expectWithin('distributed ONNX infer over the pack size', c, { timers: 1.5, immediates: 1.5, postMessages: 1.2, msgpackEncodes: 3.5, msgpackDecodes: 3.5, tensorCopies: 1.2 })
  })
})
