// The gRPC port's size and connection bounds, on a local port (grpc-js client and server): each bound
// exercised (a message past the limit, an idle connection, calls past the streams of one connection).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { decodeRequest, encodeAccept, encodeHeartbeat, subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { settledWithin, ifStarted } from '@cohort/test-support'
import { PROTO_DIR, startGrpcServer, type GrpcServerHandle } from './server.ts'

/** A gRPC message as the proto-loader client takes and gives it (keepCase, longs as strings). */
type Msg = Record<string, unknown>
/** The dynamic client proto-loader makes: grpc.Client plus one method per RPC. */
type OipClient = InstanceType<grpc.ServiceClientConstructor>

/** The dynamic `inference.GRPCInferenceService` client constructor of the loaded proto. */
function inferenceService(def: protoLoader.PackageDefinition): grpc.ServiceClientConstructor {
  return (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference.GRPCInferenceService
}

describe('gRPC bounds', () => {
  const transport = new InProcessTransport()
  let server: GrpcServerHandle
  let client: OipClient
  const call = (method: string, req: Msg): Promise<Msg> =>
    new Promise((resolve, reject) => client[method]!(req, (e: grpc.ServiceError | null, r: Msg) => (e ? reject(e) : resolve(r))))

  beforeAll(async () => {
    server = await startGrpcServer({ transport, port: 0, maxMessageBytes: 4096, connectionLimits: { maxConnectionIdleMs: 300 } })
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const GRPCInferenceService = inferenceService(def)
    client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
  })

  afterAll(async () => {
    ifStarted(client)?.close()
    await ifStarted(server)?.close()
    await transport.close()
  })

  it('refuses a request message past maxMessageBytes with RESOURCE_EXHAUSTED and keeps serving', async () => {
    const big = { model_name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [8192], contents: {} }], raw_input_contents: [Buffer.alloc(8192)] }
    await expect(call('ModelInfer', big)).rejects.toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED })
    expect(await call('ServerLive', {})).toEqual({ live: true })
  })

  it('closes a connection left idle past maxConnectionIdleMs (the client reconnects on its next call)', async () => {
    expect(await call('ServerLive', {})).toEqual({ live: true })
    const ch = client.getChannel()
    expect(ch.getConnectivityState(false)).toBe(grpc.connectivityState.READY)
    await expect.poll(() => ch.getConnectivityState(false), { timeout: 10_000, interval: 50 }).not.toBe(grpc.connectivityState.READY)
    expect(await call('ServerLive', {})).toEqual({ live: true })
  })
})

describe('gRPC bounds by default', () => {
  const transport = new InProcessTransport()
  const cleanups: (() => unknown)[] = []
  let server: GrpcServerHandle
  let def: protoLoader.PackageDefinition
  let held = 0
  beforeAll(async () => {
    // A worker that accepts every request of "m", heartbeats, and never replies: each call stays
    // open (one HTTP/2 stream) until the client cancels it.
    const subj = subjects('cohort')
    const sub = transport.subscribe(subj.infer('m'), { queue: subj.queue('m') })
    const beat = () => transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'holder', intervalMs: 100 }))
    beat()
    const timer = setInterval(beat, 100)
    void (async () => {
      for await (const m of sub) {
        const req = decodeRequest(m.data)
        held++
        if (req.ack) transport.publish(req.ack, encodeAccept({ v: 1, id: req.id, worker: 'holder' }))
      }
    })()
    cleanups.push(
      () => clearInterval(timer),
      () => sub.unsubscribe(),
    )
    server = await startGrpcServer({ transport, port: 0, requestTimeoutMs: 120_000 })
    def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  })
  afterAll(async () => {
    for (const f of cleanups.splice(0).reverse()) await f()
    await ifStarted(server)?.close()
    await transport.close()
  })

  const client = () => {
    // Its own connection (grpc-js shares one between clients of a target by default).
    const c = new (inferenceService(def))(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 })
    cleanups.push(() => c.close())
    return c
  }
  /** A ModelInfer held by the worker; settles (with its error) when cancelled or the server closes. */
  const hold = (c: OipClient, x: number) => {
    let call: grpc.ClientUnaryCall | undefined
    const done = new Promise<grpc.ServiceError | null>((resolve) => {
      const req = { model_name: 'm', inputs: [{ name: 'x', datatype: 'FP64', shape: [1], contents: { fp64_contents: [x] } }] }
      call = c['ModelInfer']!(req, (e: grpc.ServiceError | null) => resolve(e)) as grpc.ClientUnaryCall
    })
    return { cancel: () => call?.cancel(), done }
  }

  it('runs at most 100 calls at once on one connection (grpc.max_concurrent_streams): the next waits for a stream', async () => {
    const one = client()
    const calls = Array.from({ length: 101 }, (_, i) => hold(one, i))
    await expect.poll(() => held, { timeout: 20_000, interval: 20 }).toBe(100)
    // A call on a second connection arrives while the 101st of the first still waits.
    const other = hold(client(), 1000)
    await expect.poll(() => held, { timeout: 20_000, interval: 20 }).toBe(101)
    expect(await settledWithin(calls[100]!.done, 200)).toBe('pending')
    expect(held).toBe(101)
    // One call of the first connection ends: its stream is free, and the 101st goes through.
    calls[0]!.cancel()
    expect((await calls[0]!.done)?.code).toBe(grpc.status.CANCELLED)
    await expect.poll(() => held, { timeout: 20_000, interval: 20 }).toBe(102)
    for (const c of [...calls, other]) c.cancel()
    await Promise.all([...calls, other].map((c) => c.done))
  }, 60_000)
})
